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

// StartCoreDNS runs CoreDNS in this process's network namespace, serving
// the cluster's names on listen:53 (an address of a device the test made,
// such as a master's VPN address), until the test ends; it returns once
// CoreDNS answers. Its log is printed when the test fails.
func (c *Cluster) StartCoreDNS(tb testing.TB, listen netip.Addr) {
	tb.Helper()
	ctx := context.Background()
	root, err := DefaultCacheRoot()
	if err != nil {
		tb.Fatal(err)
	}
	binary, err := EnsureCoreDNS(ctx, root, nil)
	if err != nil {
		tb.Fatal(err)
	}
	dir := tb.TempDir()
	args, err := c.CoreDNSConfig(ctx, dir, c.Config.Host, listen)
	if err != nil {
		tb.Fatal(err)
	}
	var log bytes.Buffer
	var mu sync.Mutex
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), OwnerEnv+"=coredns-"+randhex.String(6))
	cmd.Stdout = writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return log.Write(p) })
	cmd.Stderr = cmd.Stdout
	exited, err := childproc.Start(cmd)
	if err != nil {
		tb.Fatalf("testcluster: start CoreDNS: %v", err)
	}
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if tb.Failed() {
			mu.Lock()
			tb.Logf("coredns on %s:\n%s", listen, log.String())
			mu.Unlock()
		}
	})
	// Ready once it answers for the cluster's domain over UDP.
	resolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", netip.AddrPortFrom(listen, 53).String())
	}}
	deadline := time.Now().Add(30 * time.Second)
	for {
		lookup, cancel := context.WithTimeout(ctx, time.Second)
		_, err := resolver.LookupHost(lookup, "kubernetes.default.svc."+ClusterDomain+".")
		cancel()
		if err == nil {
			return
		}
		select {
		case <-exited:
			mu.Lock()
			defer mu.Unlock()
			tb.Fatalf("testcluster: CoreDNS exited:\n%s", log.String())
		default:
		}
		if time.Now().After(deadline) {
			tb.Fatalf("testcluster: CoreDNS on %s does not answer: %v", listen, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
