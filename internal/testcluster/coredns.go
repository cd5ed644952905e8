package testcluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"gridweave.dev/internal/childproc"
	"gridweave.dev/internal/randhex"
)

// CoreDNSVersion is the CoreDNS release that serves the test control
// plane's Services to the pods of real nodes, built inside its own module
// (with its own go.sum) as its release is.
const (
	CoreDNSVersion = "v1.15.0"
	coreDNSModule  = "github.com/coredns/coredns"
)

// ClusterDomain is the cluster's DNS domain.
const ClusterDomain = "cluster.local"

// EnsureCoreDNS returns the path of CoreDNS at CoreDNSVersion, building it
// from the Go module proxy into cacheRoot the first time (about a minute
// and a half on two cores), under a file lock as EnsureBinaries.
func EnsureCoreDNS(ctx context.Context, cacheRoot string, progress io.Writer) (string, error) {
	if progress == nil {
		progress = io.Discard
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s/%s\n%s\n", buildRecipeVersion, runtime.Version(), runtime.GOOS, runtime.GOARCH, CoreDNSVersion)
	final := filepath.Join(cacheRoot, fmt.Sprintf("coredns-%s_%s", CoreDNSVersion, hex.EncodeToString(h.Sum(nil))[:12]))
	err := ensureBuilt(ctx, final, progress, "coredns "+CoreDNSVersion, func(staging string) error {
		tools, err := kubeletToolsDir()
		if err != nil {
			return err
		}
		dir, err := downloadModule(ctx, tools, coreDNSModule, CoreDNSVersion)
		if err != nil {
			return err
		}
		return goCommand(ctx, dir, "build", "-trimpath", "-o", filepath.Join(staging, "coredns"), ".")
	})
	if err != nil {
		return "", err
	}
	return filepath.Join(final, "coredns"), nil
}

// coreDNSUser is the identity CoreDNS reaches the API server with, bound to
// coreDNSRole: what its kubernetes plugin reads with "pods insecure"
// (services, namespaces, endpointslices; not pods, which only "pods
// verified" watches).
const (
	coreDNSUser = "gridweave-test:coredns"
	coreDNSRole = "gridweave-test:coredns"
)

// CoreDNSConfig writes into dir what CoreDNS needs to serve the cluster's
// Services and pods (domain ClusterDomain) on listen:53: a kubeconfig
// reaching the API server at server (as seen from where CoreDNS runs; the
// certificate names 127.0.0.1) with a credential that may only list and
// watch what the kubernetes plugin reads, and a Corefile. It returns
// CoreDNS's arguments after its binary. Names outside the cluster's
// domain are refused: the tests have no upstream resolver.
func (c *Cluster) CoreDNSConfig(ctx context.Context, dir, server string, listen netip.Addr) ([]string, error) {
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: coreDNSRole},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"services", "namespaces"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
		},
	}
	if _, err := c.Kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: coreDNSRole},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: coreDNSRole},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: coreDNSUser}},
	}
	if _, err := c.Kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	cert, key, err := c.certs.clientCert(coreDNSUser)
	if err != nil {
		return nil, err
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: c.Config.CAData, TLSServerName: "127.0.0.1"}
	kc.AuthInfos["coredns"] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "coredns"}
	kc.CurrentContext = "c"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	kubeconfig, corefile := filepath.Join(dir, "kubeconfig"), filepath.Join(dir, "Corefile")
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		return nil, err
	}
	conf := fmt.Sprintf(`%s:53 in-addr.arpa:53 ip6.arpa:53 {
    bind %s
    errors
    kubernetes %s in-addr.arpa ip6.arpa {
        kubeconfig %s c
        pods insecure
        ttl 5
    }
    cache 5
}
`, ClusterDomain, listen, ClusterDomain, kubeconfig)
	if err := os.WriteFile(corefile, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	return []string{"-conf", corefile}, nil
}

// CoreDNS is a CoreDNS process serving the cluster's names.
type CoreDNS struct {
	cmd     *exec.Cmd
	exited  <-chan error
	stopped sync.Once
	mu      sync.Mutex
	log     bytes.Buffer
}

// RunCoreDNS runs CoreDNS in this process's network namespace, serving the
// cluster's names on listen:53 (an address of a device the caller made,
// such as a master's VPN address), its configuration in dir; owner marks
// the process for Leftovers (OwnerEnv). It returns once CoreDNS answers;
// Stop ends it.
func (c *Cluster) RunCoreDNS(ctx context.Context, listen netip.Addr, dir, owner string) (*CoreDNS, error) {
	root, err := DefaultCacheRoot()
	if err != nil {
		return nil, err
	}
	binary, err := EnsureCoreDNS(ctx, root, nil)
	if err != nil {
		return nil, err
	}
	args, err := c.CoreDNSConfig(ctx, dir, c.Config.Host, listen)
	if err != nil {
		return nil, err
	}
	d := &CoreDNS{cmd: exec.Command(binary, args...)}
	d.cmd.Env = append(os.Environ(), OwnerEnv+"="+owner)
	d.cmd.Stdout = writerFunc(func(p []byte) (int, error) { d.mu.Lock(); defer d.mu.Unlock(); return d.log.Write(p) })
	d.cmd.Stderr = d.cmd.Stdout
	if d.exited, err = childproc.Start(d.cmd); err != nil {
		return nil, fmt.Errorf("testcluster: start CoreDNS: %w", err)
	}
	// Ready once it answers for the cluster's domain over UDP.
	resolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var dialer net.Dialer
		return dialer.DialContext(ctx, "udp", netip.AddrPortFrom(listen, 53).String())
	}}
	deadline := time.Now().Add(30 * time.Second)
	for {
		lookup, cancel := context.WithTimeout(ctx, time.Second)
		_, err := resolver.LookupHost(lookup, "kubernetes.default.svc."+ClusterDomain+".")
		cancel()
		if err == nil {
			return d, nil
		}
		select {
		case err := <-d.exited:
			return nil, fmt.Errorf("testcluster: CoreDNS exited (%v):\n%s", err, d.Log())
		default:
		}
		if ctx.Err() != nil {
			d.Stop()
			return nil, ctx.Err()
		}
		if time.Now().After(deadline) {
			d.Stop()
			return nil, fmt.Errorf("testcluster: CoreDNS on %s does not answer: %v\n%s", listen, err, d.Log())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Stop ends CoreDNS and waits for it; a second Stop does nothing.
func (d *CoreDNS) Stop() {
	d.stopped.Do(func() {
		_ = d.cmd.Process.Kill()
		<-d.exited
	})
}

// Log is what CoreDNS printed.
func (d *CoreDNS) Log() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.log.String()
}

// StartCoreDNS is RunCoreDNS until the test ends; its log is printed when
// the test fails.
func (c *Cluster) StartCoreDNS(tb testing.TB, listen netip.Addr) {
	tb.Helper()
	d, err := c.RunCoreDNS(context.Background(), listen, tb.TempDir(), "coredns-"+randhex.String(6))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		d.Stop()
		if tb.Failed() {
			tb.Logf("coredns on %s:\n%s", listen, d.Log())
		}
	})
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
