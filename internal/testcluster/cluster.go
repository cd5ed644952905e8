package testcluster

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	rayclient "github.com/ray-project/kuberay/ray-operator/pkg/client/clientset/versioned"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"gridweave.dev/internal/randhex"
)

// Options configure a control plane. A nil *Options means defaults.
type Options struct {
	// CacheRoot is where binaries are built and cached; default
	// DefaultCacheRoot().
	CacheRoot string
	// Dir holds the cluster's state, certificates, kubeconfig and logs.
	// Default: a new temporary directory, removed by Stop.
	Dir string
	// Progress receives one line per start-up step; default discard.
	Progress io.Writer
	// StartTimeout bounds each component's start; default 90s.
	StartTimeout time.Duration
	// WithoutGridweaveCRDs leaves out Gridweave's own CRDs (GridweaveJob,
	// GridweaveEndpoint), for a test of what installs them; KubeRay's are
	// always applied.
	WithoutGridweaveCRDs bool
	// ClusterCIDR, when set, is the pod range the controller-manager
	// allocates Nodes' pod CIDRs from (its node IPAM, in /NodeCIDRMaskSize
	// prefixes, default 24), as a real cluster does for its kubelets.
	// Unset, no pod CIDR is allocated: tests set kwok Nodes' own.
	ClusterCIDR      string
	NodeCIDRMaskSize int
	// KubeRayThroughAPIServer has the KubeRay operator reach each Ray
	// head's dashboard through the API server's service proxy (its
	// --use-kubernetes-proxy), as an operator outside the cluster must:
	// it runs on the host, where the cluster's DNS names of the heads'
	// Services do not resolve. For clusters whose pods run (real nodes);
	// a RayJob needs it to learn how its job ended.
	KubeRayThroughAPIServer bool
}

// Network ranges used inside the control plane. They are data only (no
// traffic is ever sent to them) and lie in 198.18.0.0/15, the benchmarking
// range this project's tests use.
const (
	ServiceCIDR    = "198.19.0.0/17"
	DefaultPodCIDR = "198.18.0.0/16"
)

// KwokNodeAnnotation marks the nodes that kwok manages.
const (
	KwokNodeAnnotation      = "kwok.x-k8s.io/node"
	KwokNodeAnnotationValue = "fake"
)

// ownerEnv is set in every child's environment to this cluster's id, so that
// leftovers can be found in /proc even after they were re-parented.
const ownerEnv = OwnerEnv

// OwnerEnv is the environment variable that marks a harness process with
// its owner's id; Leftovers finds processes by it. Other harnesses (Ray
// nodes, internal/raytest) set it too, so `make test` checks them as well.
const OwnerEnv = "GRIDWEAVE_TESTCLUSTER_OWNER"

// Cluster is a running control plane: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, kwok and the KubeRay operator,
// each a child process listening on free loopback ports.
type Cluster struct {
	// Config reaches the API server as a member of system:masters.
	Config *rest.Config
	Kube   kubernetes.Interface
	Ray    rayclient.Interface
	// Dynamic is a dynamic client on the same config.
	Dynamic dynamic.Interface
	// KubeconfigPath is a kubeconfig file for Config (for kubectl or for a
	// program under test).
	KubeconfigPath string
	// Dir holds state, certificates and logs.
	Dir      string
	Binaries *Binaries
	// ID is written into every child's environment (GRIDWEAVE_TESTCLUSTER_OWNER).
	ID string
	// PodLogFile is what every container of every fake pod logs, in the
	// CRI log format; AppendPodLog adds lines.
	PodLogFile string

	removeDir bool
	progress  io.Writer
	began     time.Time
	timeout   time.Duration
	// withGridweaveCRDs: start applies Gridweave's CRDs too.
	withGridweaveCRDs bool
	spawner           *spawner
	processes         []*process
	certs             *pki
	clusterCIDR       string
	nodeCIDRMask      int
	kubeRayProxy      bool
}

// controllers is the controller-manager's --controllers: all but the
// cloud's, tokencleaner too, and node IPAM only with a pod range.
func (c *Cluster) controllers() string {
	if c.clusterCIDR != "" {
		return "--controllers=*,-cloud-node-lifecycle,tokencleaner"
	}
	return "--controllers=*,-nodeipam,-cloud-node-lifecycle,tokencleaner"
}

// nodeIPAM are the controller-manager's flags that allocate Nodes' pod
// CIDRs from Options.ClusterCIDR; none without it.
func (c *Cluster) nodeIPAM() []string {
	if c.clusterCIDR == "" {
		return nil
	}
	mask := c.nodeCIDRMask
	if mask == 0 {
		mask = 24
	}
	return []string{"--allocate-node-cidrs", "--cluster-cidr=" + c.clusterCIDR, "--node-cidr-mask-size=" + strconv.Itoa(mask)}
}

// CACertFile is the cluster CA's certificate, PEM (what kubelets trust the
// API server and its clients by).
func (c *Cluster) CACertFile() string { return c.certs.caCertFile }

// NodeConfig returns a config that reaches the API server as the kubelet
// of Node name does: a client certificate for system:node:<name> in
// system:nodes, which the node authorizer and NodeRestriction hold to that
// Node (and its pods).
func (c *Cluster) NodeConfig(name string) (*rest.Config, error) {
	cert, key, err := c.certs.clientCert("system:node:"+name, "system:nodes")
	if err != nil {
		return nil, err
	}
	return &rest.Config{Host: c.Config.Host, TLSClientConfig: rest.TLSClientConfig{CAData: c.Config.CAData, CertData: cert, KeyData: key}}, nil
}

// New starts a control plane and returns when the API server is ready, the
// KubeRay CRDs are established and every component reports healthy. On
// error, everything already started is stopped.
func New(ctx context.Context, opts *Options) (_ *Cluster, err error) {
	if opts == nil {
		opts = &Options{}
	}
	c := &Cluster{progress: opts.Progress, timeout: opts.StartTimeout, Dir: opts.Dir, withGridweaveCRDs: !opts.WithoutGridweaveCRDs,
		clusterCIDR: opts.ClusterCIDR, nodeCIDRMask: opts.NodeCIDRMaskSize, kubeRayProxy: opts.KubeRayThroughAPIServer}
	if c.progress == nil {
		c.progress = io.Discard
	}
	if c.timeout == 0 {
		c.timeout = 90 * time.Second
	}
	cacheRoot := opts.CacheRoot
	if cacheRoot == "" {
		if cacheRoot, err = DefaultCacheRoot(); err != nil {
			return nil, err
		}
	}
	if c.Binaries, err = EnsureBinaries(ctx, cacheRoot, c.progress); err != nil {
		return nil, err
	}
	if c.Dir == "" {
		if c.Dir, err = os.MkdirTemp("", "gridweave-testcluster-"); err != nil {
			return nil, err
		}
		c.removeDir = true
	}
	c.ID = randhex.String(8)
	c.spawner = newSpawner()
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w\n%s", err, c.logSummary(2048))
			c.Stop()
		}
	}()
	if err := c.start(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context) error {
	c.began = time.Now()
	certs, err := newPKI(mkdir(c.Dir, "pki"))
	if err != nil {
		return err
	}
	c.certs = certs
	token := randhex.String(24)
	tokenFile := filepath.Join(c.Dir, "pki", "tokens.csv")
	if err := os.WriteFile(tokenFile, []byte(token+`,admin,admin,"system:masters"`+"\n"), 0o600); err != nil {
		return err
	}

	// etcd
	var etcdURL string
	if _, err := c.startComponent(ctx, "etcd", 2, func(ports []int) []string {
		etcdURL = "http://127.0.0.1:" + strconv.Itoa(ports[0])
		peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
		return []string{
			c.Binaries.Etcd,
			"--name=testcluster",
			"--data-dir=" + mkdir(c.Dir, "etcd"),
			"--listen-client-urls=" + etcdURL,
			"--advertise-client-urls=" + etcdURL,
			"--listen-peer-urls=" + peerURL,
			"--initial-advertise-peer-urls=" + peerURL,
			"--initial-cluster=testcluster=" + peerURL,
			// Test data need not survive a power cut; fsync would make a
			// 2-core machine wait on the disk for every write.
			"--unsafe-no-fsync",
			"--log-level=warn",
		}
	}, func(ctx context.Context, ports []int) error {
		return httpOK(ctx, plainHTTP, "http://127.0.0.1:"+strconv.Itoa(ports[0])+"/health", "")
	}); err != nil {
		return err
	}

	// kube-apiserver
	var apiPort int
	if _, err := c.startComponent(ctx, "kube-apiserver", 1, func(ports []int) []string {
		apiPort = ports[0]
		return []string{
			c.Binaries.KubeAPIServer,
			"--etcd-servers=" + etcdURL,
			"--bind-address=127.0.0.1",
			"--advertise-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(apiPort),
			"--cert-dir=" + mkdir(c.Dir, "kube-apiserver"),
			"--tls-cert-file=" + certs.servingCertFile,
			"--tls-private-key-file=" + certs.servingKeyFile,
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file=" + certs.serviceAccountPubKey,
			"--service-account-signing-key-file=" + certs.serviceAccountKey,
			"--token-auth-file=" + tokenFile,
			// Kubelets join by TLS bootstrapping, with a bootstrap token.
			"--enable-bootstrap-token-auth",
			"--client-ca-file=" + certs.caCertFile,
			// Kubelets' credentials (NodeConfig) are held to their own
			// Node and its pods, as on a real cluster.
			"--authorization-mode=Node,RBAC",
			"--enable-admission-plugins=NodeRestriction",
			"--service-cluster-ip-range=" + ServiceCIDR,
			// The "kubernetes" Service's endpoint would be 127.0.0.1, which
			// Endpoints validation rejects; nothing here needs it.
			"--endpoint-reconciler-type=none",
			"--allow-privileged=true",
			// Pod logs are served by kwok on 127.0.0.1 with a certificate
			// from this cluster's CA.
			"--kubelet-certificate-authority=" + certs.caCertFile,
			// Real kubelets (internal/realnode) authenticate the API
			// server's logs and exec calls by this certificate.
			"--kubelet-client-certificate=" + certs.kubeletClientCertFile,
			"--kubelet-client-key=" + certs.kubeletClientKeyFile,
			"--kubelet-preferred-address-types=InternalIP",
			"--profiling=false",
		}
	}, func(ctx context.Context, ports []int) error {
		client, err := caHTTPClient(certs.caCertPEM)
		if err != nil {
			return err
		}
		return httpOK(ctx, client, "https://127.0.0.1:"+strconv.Itoa(ports[0])+"/readyz", token)
	}); err != nil {
		return err
	}

	c.Config = &rest.Config{
		Host:            "https://127.0.0.1:" + strconv.Itoa(apiPort),
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: certs.caCertPEM},
		QPS:             500,
		Burst:           1000,
	}
	if err := c.writeKubeconfig(); err != nil {
		return err
	}
	if c.Kube, err = kubernetes.NewForConfig(c.Config); err != nil {
		return err
	}
	if c.Ray, err = rayclient.NewForConfig(c.Config); err != nil {
		return err
	}
	if c.Dynamic, err = dynamic.NewForConfig(c.Config); err != nil {
		return err
	}

	// The KubeRay CRDs go in before the controllers start: the operator's
	// informers need them, and the garbage collector only learns of new
	// resource types at its periodic rediscovery (30s), which would delay the
	// collection of everything a RayCluster owns.
	fmt.Fprintf(c.progress, "testcluster: %6.2fs applying KubeRay CRDs and Gridweave's\n", time.Since(c.began).Seconds())
	if _, err := c.ApplyKubeRayCRDs(ctx); err != nil {
		return err
	}
	if c.withGridweaveCRDs {
		if _, err := c.ApplyGridweaveCRDs(ctx); err != nil {
			return err
		}
	}

	// kube-controller-manager and kube-scheduler
	if _, err := c.startComponent(ctx, "kube-controller-manager", 1, func(ports []int) []string {
		args := []string{
			c.Binaries.KubeControllerManager,
			"--kubeconfig=" + c.KubeconfigPath,
			"--authentication-kubeconfig=" + c.KubeconfigPath,
			"--authorization-kubeconfig=" + c.KubeconfigPath,
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(ports[0]),
			"--cert-dir=" + mkdir(c.Dir, "kube-controller-manager"),
			// nodeipam would fight the pod CIDRs tests set, unless the
			// cluster has a pod range; there is no cloud. nodelifecycle
			// stays: it lifts the not-ready taint from kwok nodes.
			// tokencleaner removes expired bootstrap tokens.
			c.controllers(),
			// The kubelets' client certificates, signed by the cluster CA.
			"--cluster-signing-cert-file=" + certs.caCertFile,
			"--cluster-signing-key-file=" + certs.caKeyFile,
			// kwok renews every node's heartbeat from one process; on two
			// busy cores a renewal can come late, and the default 50s grace
			// would mark the node Unknown and its pods not ready.
			"--node-monitor-grace-period=10m",
			"--leader-elect=false",
			"--service-account-private-key-file=" + certs.serviceAccountKey,
			"--root-ca-file=" + certs.caCertFile,
			"--service-cluster-ip-range=" + ServiceCIDR,
			"--profiling=false",
		}
		return append(args, c.nodeIPAM()...)
	}, func(ctx context.Context, ports []int) error {
		return httpOK(ctx, insecureHTTPS, "https://127.0.0.1:"+strconv.Itoa(ports[0])+"/healthz", "")
	}); err != nil {
		return err
	}
	if _, err := c.startComponent(ctx, "kube-scheduler", 1, func(ports []int) []string {
		return []string{
			c.Binaries.KubeScheduler,
			"--kubeconfig=" + c.KubeconfigPath,
			"--authentication-kubeconfig=" + c.KubeconfigPath,
			"--authorization-kubeconfig=" + c.KubeconfigPath,
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(ports[0]),
			"--cert-dir=" + mkdir(c.Dir, "kube-scheduler"),
			"--leader-elect=false",
			"--profiling=false",
		}
	}, func(ctx context.Context, ports []int) error {
		return httpOK(ctx, insecureHTTPS, "https://127.0.0.1:"+strconv.Itoa(ports[0])+"/healthz", "")
	}); err != nil {
		return err
	}

	// kwok: it manages the fake nodes and their pods, and serves as their
	// kubelet on a loopback port, so that pod logs travel the real path
	// (client → kube-apiserver → "kubelet") and return PodLogFile.
	c.PodLogFile = filepath.Join(c.Dir, "pod-logs.log")
	if err := os.WriteFile(c.PodLogFile, nil, 0o644); err != nil {
		return err
	}
	logsConfig := filepath.Join(c.Dir, "kwok-logs.yaml")
	if err := os.WriteFile(logsConfig, []byte(fmt.Sprintf(`apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterLogs
metadata:
  name: all-pods
spec:
  logs:
  - logsFile: %q
    follow: true
`, c.PodLogFile)), 0o644); err != nil {
		return err
	}
	if _, err := c.startComponent(ctx, "kwok", 1, func(ports []int) []string {
		return []string{
			c.Binaries.Kwok,
			"--kubeconfig=" + c.KubeconfigPath,
			"--config=" + c.Binaries.KwokStages,
			"--config=" + logsConfig,
			"--manage-all-nodes=false",
			"--manage-nodes-with-annotation-selector=" + KwokNodeAnnotation + "=" + KwokNodeAnnotationValue,
			"--cidr=" + DefaultPodCIDR,
			"--node-ip=127.0.0.1",
			"--node-port=" + strconv.Itoa(ports[0]),
			"--server-address=127.0.0.1:" + strconv.Itoa(ports[0]),
			"--tls-cert-file=" + certs.servingCertFile,
			"--tls-private-key-file=" + certs.servingKeyFile,
		}
	}, func(ctx context.Context, ports []int) error {
		return httpOK(ctx, insecureHTTPS, "https://127.0.0.1:"+strconv.Itoa(ports[0])+"/healthz", "")
	}); err != nil {
		return err
	}

	if _, err := c.startComponent(ctx, "kuberay-operator", 2, func(ports []int) []string {
		argv := []string{
			c.Binaries.KubeRayOperator,
			"--kubeconfig=" + c.KubeconfigPath,
			"--enable-leader-election=false",
			"--metrics-addr=127.0.0.1:" + strconv.Itoa(ports[0]),
			"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(ports[1]),
			"--log-stdout-encoder=console",
		}
		if c.kubeRayProxy {
			argv = append(argv, "--use-kubernetes-proxy")
		}
		return argv
	}, func(ctx context.Context, ports []int) error {
		return httpOK(ctx, plainHTTP, "http://127.0.0.1:"+strconv.Itoa(ports[1])+"/readyz", "")
	}); err != nil {
		return err
	}

	// Pods need their namespace's default ServiceAccount, which the
	// controller-manager creates shortly after start.
	if err := c.WaitForServiceAccount(ctx, "default"); err != nil {
		return err
	}
	fmt.Fprintf(c.progress, "testcluster: control plane ready in %s (%s)\n", time.Since(c.began).Round(time.Millisecond), c.Config.Host)
	return nil
}

// componentGOGC is the collector's pace of the control plane's programs
// (all written in Go), unless the tests run with a GOGC of their own.
// They allocate much and keep little, and the tests' machine has memory
// to spare but few cores. A start of the control plane took 15.5
// processor seconds at GOGC=100, 14.8 at 200, 12.0 at 400 and 12.0 at
// 800 (the API server's peak resident set 0.7, 1.1, 1.5 and 2.7 GB); the
// requests the tests make of it cost less too (manifest/validation's
// tests: 248 -> 189 processor seconds at 400).
const componentGOGC = "400"

// benchmarking reports whether the test binary was asked to run
// benchmarks (-test.bench): they measure the control plane as it is
// deployed, at Go's default pace, not the tests' componentGOGC.
func benchmarking() bool {
	f := flag.Lookup("test.bench")
	return f != nil && f.Value.String() != ""
}

// componentGOMEMLIMIT bounds what that pace lets a program's heap grow
// to: past it, the collector runs as often as it must. Several control
// planes run at once on a machine with many cores. It is above what the
// tests need: at 2GiB, manifest/validation's API server reached it and
// its tests took 230 processor seconds, not 189.
const componentGOMEMLIMIT = "4GiB"

// startComponent picks nPorts free loopback ports, starts the program that
// args(ports) describes (args[0] is the binary) and waits until ready
// reports nil. A start that lost a race for a port is retried with new ports.
func (c *Cluster) startComponent(ctx context.Context, name string, nPorts int, args func(ports []int) []string, ready func(ctx context.Context, ports []int) error) (*process, error) {
	const attempts = 3
	env := append(os.Environ(), ownerEnv+"="+c.ID)
	if _, set := os.LookupEnv("GOGC"); !set && !benchmarking() {
		env = append(env, "GOGC="+componentGOGC)
		if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
			env = append(env, "GOMEMLIMIT="+componentGOMEMLIMIT)
		}
	}
	for attempt := 1; ; attempt++ {
		ports, err := FreePorts(nPorts)
		if err != nil {
			return nil, err
		}
		argv := args(ports)
		fmt.Fprintf(c.progress, "testcluster: %6.2fs starting %s\n", time.Since(c.began).Seconds(), name)
		p, err := c.spawner.startProcess(name, c.Dir, argv[0], argv[1:], env)
		if err != nil {
			return nil, err
		}
		c.processes = append(c.processes, p)
		if ready == nil {
			ready = func(context.Context, []int) error { return nil }
		}
		err = c.waitReady(ctx, p, func(ctx context.Context) error { return ready(ctx, ports) })
		if err == nil {
			return p, nil
		}
		p.stop(5 * time.Second)
		if attempt < attempts && strings.Contains(p.tail(8192), "address already in use") {
			continue
		}
		return nil, err
	}
}

// waitReady polls ready until it succeeds, the process exits, or the start
// timeout passes.
func (c *Cluster) waitReady(ctx context.Context, p *process, ready func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var last error
	for {
		if !p.running() {
			return p.exitError()
		}
		probeCtx, probeCancel := context.WithTimeout(ctx, 2*time.Second)
		last = ready(probeCtx)
		probeCancel()
		if last == nil {
			// One more look: a process can answer and then die on a late error.
			if !p.running() {
				return p.exitError()
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %s: %v", p.name, c.timeout, last)
		case <-p.exited:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stop stops every component, newest first, each by its own PID (SIGTERM,
// then SIGKILL after a grace period), and removes Dir if New created it.
// It is safe to call more than once.
func (c *Cluster) Stop() {
	for i := len(c.processes) - 1; i >= 0; i-- {
		c.processes[i].stop(10 * time.Second)
	}
	if c.spawner != nil {
		c.spawner.close()
	}
	if c.removeDir {
		_ = os.RemoveAll(c.Dir)
	}
}

// PIDs returns the process ids of every component started, in start order.
func (c *Cluster) PIDs() []int {
	pids := make([]int, 0, len(c.processes))
	for _, p := range c.processes {
		pids = append(pids, p.PID())
	}
	return pids
}

// Logs returns the last max bytes of every component's log, one section per
// component.
func (c *Cluster) Logs(max int64) string { return c.logSummary(max) }

func (c *Cluster) logSummary(max int64) string {
	var b strings.Builder
	for _, p := range c.processes {
		fmt.Fprintf(&b, "----- %s (pid %d, log %s) -----\n%s\n", p.name, p.PID(), p.logPath, p.tail(max))
	}
	return b.String()
}

func (c *Cluster) writeKubeconfig() error {
	c.KubeconfigPath = filepath.Join(c.Dir, "kubeconfig")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["testcluster"] = &clientcmdapi.Cluster{
		Server:                   c.Config.Host,
		CertificateAuthorityData: c.Config.CAData,
	}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: c.Config.BearerToken}
	cfg.Contexts["testcluster"] = &clientcmdapi.Context{Cluster: "testcluster", AuthInfo: "admin", Namespace: "default"}
	cfg.CurrentContext = "testcluster"
	return clientcmd.WriteToFile(*cfg, c.KubeconfigPath)
}

// FreePorts returns n distinct loopback TCP ports that were free a moment ago.
func FreePorts(n int) ([]int, error) {
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

var (
	plainHTTP     = &http.Client{}
	insecureHTTPS = &http.Client{Transport: &http.Transport{
		// Health endpoints of kube-controller-manager and kube-scheduler
		// serve a self-signed certificate made at their start.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback health probe only
	}}
)

func caHTTPClient(caPEM []byte) (*http.Client, error) {
	cfg, err := rest.TLSConfigFor(&rest.Config{TLSClientConfig: rest.TLSClientConfig{CAData: caPEM}})
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}, nil
}

// httpOK reports nil when GET url answers 200.
func httpOK(ctx context.Context, client *http.Client, url, bearer string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

func mkdir(parent, name string) string {
	dir := filepath.Join(parent, name)
	_ = os.MkdirAll(dir, 0o700)
	return dir
}

// StopComponent stops one component (e.g. "kuberay-operator") and leaves
// the others running, as an outage of that component would; it is not
// restarted. A test of what happens without it uses its own cluster
// (Start), never the shared one.
func (c *Cluster) StopComponent(name string) error {
	for _, p := range c.processes {
		if p.name == name {
			p.stop(10 * time.Second)
			return nil
		}
	}
	return fmt.Errorf("testcluster: no component %q", name)
}
