package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"golang.zx2c4.com/wireguard/wgctrl"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"gridweave.dev/deploy"
	"gridweave.dev/deploy/image"
	"gridweave.dev/gridweave"
	"gridweave.dev/gridweave/fleet"
	"gridweave.dev/gridweave/tlspin"
	"gridweave.dev/internal/childproc"
	"gridweave.dev/internal/netnstest"
	"gridweave.dev/internal/realnode"
	"gridweave.dev/internal/testcluster"
	"gridweave.dev/internal/wgdevice"
)

// The end-to-end fixture: a master (the server binary, its wireguard-go
// device and its underlay address in the test's own namespace, since it
// must reach the test control plane on loopback) and nodes (each a network
// namespace linked to the master by a veth pair, with its own mount and
// UTS namespace when the join command runs: its hostname, /usr/local/bin,
// /var/lib/gridweave and /run/wireguard). Every address is in
// 198.18.0.0/15: the master's underlay 198.18.240.1, the links
// 198.18.241.0/24 (a /30 each), the gateway's bridge 198.18.244.0/30, the NATs' outside links 198.18.243.0/24
// and inside links 198.18.245.0/24 (a /30 each), the VPN 198.19.240+k.0/24, the cluster's
// pod range 198.18.0.0/17 (e2eClusterCIDR): the k3s stand-in's pod CIDRs
// 198.18.64+i.0/24, the controller-manager's for real kubelets inside
// 198.18.0.0/18 (kubeletPodRange).

const (
	e2eAdminToken = "e2e-admin-token-0123456789abcdef"
	e2eVersion    = "1.4.0"
	e2eK3sToken   = "K10e2e::node:agent-token-for-the-e2e-test"
	e2eImageName  = "gridweave-worker:e2e"
	masterUnderIP = "198.18.240.1"
	e2eJWTSecret  = "e2e-jwt-secret-0123456789abcdef0123456789"
	// e2eClusterCIDR is the cluster's pod range (CLUSTER_CIDR).
	e2eClusterCIDR = "198.18.0.0/17"
	// kubeletPodRange is where the controller-manager allocates pod CIDRs
	// (its --cluster-cidr), inside e2eClusterCIDR.
	kubeletPodRange = "198.18.0.0/18"
)

// e2eMarks makes the ownership marks the e2e master makes: an HMAC under
// a secret derived from its JWT secret.
func e2eMarks(t testing.TB) *fleet.Marker {
	t.Helper()
	marks, err := gridweave.NodeMarker(e2eJWTSecret)
	if err != nil {
		t.Fatal(err)
	}
	return marks
}

// e2eBinaries are built once per test binary.
var e2eBinaries struct {
	once                  sync.Once
	dir                   string
	server, agent, future string // the server, the agent (e2eVersion), an agent a major version ahead
	past                  string // an agent a major version behind
	err                   error
}

func buildE2EBinaries(t testing.TB) {
	t.Helper()
	e2eBinaries.once.Do(func() {
		dir, err := os.MkdirTemp("", "gridweave-e2e-bin-")
		if err != nil {
			e2eBinaries.err = err
			return
		}
		e2eBinaries.dir = dir
		e2eBinaries.server = filepath.Join(dir, "server")
		e2eBinaries.agent = filepath.Join(dir, "agents", "join-node-linux-amd64")
		e2eBinaries.future = filepath.Join(dir, "future", "join-node")
		e2eBinaries.past = filepath.Join(dir, "past", "join-node")
		builds := [][]string{
			{"-o", e2eBinaries.server, "../server"},
			{"-ldflags", "-X main.version=" + e2eVersion, "-o", e2eBinaries.agent, "."},
			{"-ldflags", "-X main.version=2.0.0", "-o", e2eBinaries.future, "."},
			{"-ldflags", "-X main.version=0.9.0", "-o", e2eBinaries.past, "."},
		}
		for _, args := range builds {
			out, err := exec.Command("go", append([]string{"build"}, args...)...).CombinedOutput()
			if err != nil {
				e2eBinaries.err = fmt.Errorf("go build %s: %v: %s", strings.Join(args, " "), err, out)
				return
			}
		}
	})
	if e2eBinaries.err != nil {
		t.Fatal(e2eBinaries.err)
	}
}

// master is the control plane's host.
type master struct {
	t         testing.TB
	tc        *testcluster.Cluster
	namespace string // Kubernetes namespace of the RayCluster
	device    string // the WireGuard device the server makes (wireguard-go in its process here)
	wgPort    int
	vpnPrefix netip.Prefix
	vpnIP     netip.Addr
	binary    string // the server binary and its arguments
	args      []string
	url       string     // https://, the public listener
	pin       tlspin.Pin // the key of the certificate the server made at first start
	client    *http.Client
	env       []string
	dir       string
	targets   string // DCGM_TARGETS_DIR
	imageSum  string
	proc      *exec.Cmd
	exited    chan struct{}
	log       *bytes.Buffer
	logMu     *sync.Mutex
}

var e2eSeq struct {
	sync.Mutex
	n int
}

func nextSeq() int {
	e2eSeq.Lock()
	defer e2eSeq.Unlock()
	e2eSeq.n++
	return e2eSeq.n
}

// startMaster sets up a master host and starts the server on it.
func startMaster(t testing.TB) *master { return startMasterWith(t, false) }

// masterOptions change what startMasterOpts starts.
type masterOptions struct {
	// deployed: see startMasterWith.
	deployed bool
	// env is more of the server's environment; args more of its
	// arguments.
	env  []string
	args []string
	// clusterDNS: the cluster's DNS is CoreDNS on the master's VPN
	// address (CLUSTER_DNS), started once the server's device has it.
	clusterDNS bool
}

// startMasterWith is startMaster; deployed runs the server as the
// docs/deploy.md's systemd path does: the static binary of make server-static
// (agents built in, no AGENT_DIR), the variables of
// deploy/systemd/server.env.example and the unit's Environment= with the
// secrets filled in and the addresses moved to test addresses, no
// arguments (the unit's ExecStart).
func startMasterWith(t testing.TB, deployed bool) *master {
	t.Helper()
	return startMasterOpts(t, masterOptions{deployed: deployed})
}

// startMasterOpts is startMaster with o.
func startMasterOpts(t testing.TB, o masterOptions) *master {
	t.Helper()
	deployed := o.deployed
	netnstest.RequireRoot(t)
	buildE2EBinaries(t)
	tc := testcluster.Shared(t)
	ctx := context.Background()
	seq := nextSeq()
	m := &master{t: t, tc: tc, namespace: fmt.Sprintf("gw-e2e-%d", seq), dir: t.TempDir(), log: &bytes.Buffer{}, logMu: &sync.Mutex{}}
	if err := tc.CreateNamespace(ctx, m.namespace); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.AddNode(ctx, fmt.Sprintf("e2e-head-%d", seq), nil, nil, ""); err != nil {
		t.Fatal(err)
	}

	// The master's underlay address, on a device of its own (a veth pair
	// whose other end is unused: this kernel has no dummy devices).
	underlay := netnstest.UniqueName("gwu")
	netnstest.IP(t, "link", "add", underlay, "type", "veth", "peer", "name", underlay+"p")
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", underlay).Run() })
	netnstest.IP(t, "addr", "add", masterUnderIP+"/32", "dev", underlay)
	netnstest.IP(t, "link", "set", underlay, "up")

	// No WireGuard device: the server makes its own (no kernel WireGuard
	// here, so wireguard-go inside the server) with MASTER_VPN_IP.
	m.device, m.wgPort = netnstest.UniqueName("gwm"), freeUDPPort(t)
	m.vpnPrefix = netip.MustParsePrefix(fmt.Sprintf("198.19.%d.0/24", 240+seq%10))
	m.vpnIP = m.vpnPrefix.Addr().Next()

	// The API server reached as k3s agents reach their server: at the
	// master's VPN address, so through the tunnel.
	apiURL, _ := url.Parse(tc.Config.Host)
	k3sAddr := forward(t, netip.AddrPortFrom(m.vpnIP, 6443).String(), apiURL.Host)
	tokenFile := filepath.Join(m.dir, "k3s-agent-token")
	writeFile(t, tokenFile, e2eK3sToken+"\n", 0o600)

	// The worker image tarball (its content is opaque to the chain: the
	// stand-in runtime checks its digest).
	image := filepath.Join(m.dir, "worker-image.tar")
	writeFile(t, image, "an OCI image tarball of "+e2eImageName+"\n", 0o644)
	sum := sha256.Sum256([]byte("an OCI image tarball of " + e2eImageName + "\n"))
	m.imageSum = hex.EncodeToString(sum[:])

	m.targets = filepath.Join(m.dir, "dcgm-targets")
	port := freeTCPPort(t)
	m.url = "https://" + masterUnderIP + ":" + strconv.Itoa(port)
	overrides := []string{
		"ADMIN_TOKEN=" + e2eAdminToken,
		"JWT_SECRET=" + e2eJWTSecret,
		"KUBERAY_NAMESPACE=" + m.namespace,
		"KUBERAY_DB=" + filepath.Join(m.dir, "db", "kuberay.db"),
		"KUBERAY_PORT=" + strconv.Itoa(port),
		"VPN_HTTP_PORT=" + strconv.Itoa(freeTCPPort(t)),
		"MASTER_IP=" + masterUnderIP,
		"VPN_CIDR=" + m.vpnPrefix.String(),
		"CLUSTER_CIDR=" + e2eClusterCIDR,
		"MASTER_VPN_IP=" + m.vpnIP.String(),
		"WG_INTERFACE=" + m.device,
		"WG_PORT=" + strconv.Itoa(m.wgPort),
		"STUN_PORT=" + strconv.Itoa(freeUDPPortPair(t, m.wgPort)),
		"K3S_URL=https://" + k3sAddr,
		"WORKER_IMAGE_TAR=" + image,
		"RAY_IMAGE_WORKER=" + e2eImageName,
		"DCGM_TARGETS_DIR=" + m.targets,
		// Nothing to run: the server programs routes over netlink, as it
		// must in its image, where there is no ip executable.
		"PATH=" + t.TempDir(),
	}
	if o.clusterDNS {
		overrides = append(overrides, "CLUSTER_DNS="+m.vpnIP.String())
	}
	overrides = append(overrides, o.env...)
	if deployed {
		m.binary, m.args = staticServer(t), nil
		creds := t.TempDir() // the unit's credentials directory (%d)
		copyFile(t, tc.KubeconfigPath, filepath.Join(creds, "kubeconfig"))
		copyFile(t, tokenFile, filepath.Join(creds, "k3s-agent-token"))
		m.env = append(deployedEnv(t, creds), overrides...)
	} else {
		m.binary, m.args = e2eBinaries.server, append([]string{"--addr", strings.TrimPrefix(m.url, "https://")}, o.args...)
		m.env = append(append(os.Environ(), overrides...),
			"SERVER_VERSION="+e2eVersion,
			"KUBECONFIG="+tc.KubeconfigPath,
			"K3S_AGENT_TOKEN_FILE="+tokenFile,
			"AGENT_DIR="+filepath.Dir(e2eBinaries.agent),
		)
	}
	// Where each machine's own directories are mounted.
	// (Made where the host has none, and removed by make test's leftover
	// check.)
	for _, mountpoint := range []string{"/var/lib/gridweave", "/run/wireguard"} {
		if err := realnode.MakeMountpoint(mountpoint); err != nil {
			t.Fatal(err)
		}
	}
	m.start()
	t.Cleanup(m.stop)
	return m
}

// start runs the server and waits until it answers.
func (m *master) start() {
	t := m.t
	t.Helper()
	m.proc = exec.Command(m.binary, m.args...)
	m.proc.Env = m.env
	w := &lockedWriter{mu: m.logMu, w: m.log}
	m.proc.Stdout, m.proc.Stderr = w, w
	waited, err := childproc.Start(m.proc)
	if err != nil {
		t.Fatal(err)
	}
	m.exited = make(chan struct{})
	go func(done chan struct{}) { <-waited; close(done) }(m.exited)
	db := filepath.Join(m.dir, "db")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		select {
		case <-m.exited:
			t.Fatalf("the server exited: %s", m.logs())
		default:
		}
		// The test trusts the master as a machine does: by the pin of
		// the certificate it keeps beside its ledger.
		kp, err := tlspin.Load(filepath.Join(db, "tls.crt"), filepath.Join(db, "tls.key"))
		if err != nil {
			continue
		}
		if m.pin != (tlspin.Pin{}) && kp.Pin != m.pin {
			t.Fatalf("the master's certificate changed across a restart: %s, then %s", m.pin, kp.Pin)
		}
		m.pin = kp.Pin
		m.client = &http.Client{Transport: &http.Transport{TLSClientConfig: tlspin.ClientConfig(kp.Pin)}}
		if resp, err := m.client.Get(m.url + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server does not answer /healthz: %s", m.logs())
		}
	}
}

// stop ends the server with SIGTERM, as a service manager does.
func (m *master) stop() {
	if m.proc == nil {
		return
	}
	_ = m.proc.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.exited:
	case <-time.After(20 * time.Second):
		_ = m.proc.Process.Kill()
		<-m.exited
	}
	m.proc = nil
	if m.t.Failed() {
		m.t.Logf("server log:\n%s", m.logs())
	}
}

func (m *master) logs() string {
	m.logMu.Lock()
	defer m.logMu.Unlock()
	return m.log.String()
}

// api calls the server as the admin; it returns the status and JSON body.
func (m *master) api(method, path string, body any) (int, map[string]any) {
	m.t.Helper()
	var r io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		r = bytes.NewReader(raw)
	}
	req, _ := http.NewRequest(method, m.url+path, r)
	req.Header.Set("Authorization", "Bearer "+e2eAdminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := m.client.Do(req)
	if err != nil {
		m.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// upload posts body of contentType to the server as the admin; it
// returns the status and JSON body.
func (m *master) upload(path, contentType string, body []byte) (int, map[string]any) {
	m.t.Helper()
	req, _ := http.NewRequest("POST", m.url+path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+e2eAdminToken)
	req.Header.Set("Content-Type", contentType)
	resp, err := m.client.Do(req)
	if err != nil {
		m.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// joinCommand mints a join key and returns the mint response's
// join_command, as a person copies it.
func (m *master) joinCommand() string {
	m.t.Helper()
	status, body := m.api("POST", "/v1/nodes/join-keys", map[string]any{"kind": "org", "org": "e2e", "ttl_seconds": 3600})
	cmd, _ := body["join_command"].(string)
	if status != 201 || cmd == "" {
		m.t.Fatalf("mint: %d %v", status, body)
	}
	return cmd
}

// peers is what the master's WireGuard device holds.
func (m *master) peers() []wgtypes.Peer {
	m.t.Helper()
	c, err := wgctrl.New()
	if err != nil {
		m.t.Fatal(err)
	}
	defer c.Close()
	d, err := c.Device(m.device)
	if err != nil {
		m.t.Fatal(err)
	}
	return d.Peers
}

// route is the master's route for p ("" when there is none).
func (m *master) route(p string) string {
	m.t.Helper()
	return netnstest.Route(m.t, nil, p)
}

// node is a machine that joins.
type node struct {
	t        testing.TB
	m        *master
	ns       *netnstest.Namespace
	hostname string
	podCIDR  netip.Prefix
	dir      string // bin, state, wireguard, records, work
	// underlay is the machine's own address, hostLink the host's end of
	// its link (198.18.241.0/24: a /30 per machine).
	underlay netip.Addr
	hostLink string
	// machine, when set, makes the machine able to run a real node
	// (containerd and the kubelet): every command runs in its one set of
	// namespaces and cgroups (internal/realnode).
	machine *realnode.Machine
}

// newNode sets up machine number i (1..60) with its own network and
// files; gpu puts a stand-in nvidia-smi and k3s on its PATH.
func (m *master) newNode(i int, hostname string, gpu bool) *node {
	t := m.t
	t.Helper()
	n := m.newMachine(i, hostname, gpu)
	hostEnd := fmt.Sprintf("198.18.241.%d", 4*i+1)
	n.underlay = netip.MustParseAddr(fmt.Sprintf("198.18.241.%d", 4*i+2))
	n.hostLink, _ = netnstest.LinkToHost(t, hostEnd+"/30", n.ns, n.underlay.String()+"/30")
	n.ns.IP(t, "route", "add", masterUnderIP+"/32", "via", hostEnd)
	return n
}

// newMachine sets up machine number i's files and an empty network
// namespace, for newNode (or a test) to connect.
func (m *master) newMachine(i int, hostname string, gpu bool) *node {
	t := m.t
	t.Helper()
	n := &node{t: t, m: m, ns: netnstest.New(t, "gwn"), hostname: hostname, dir: t.TempDir(),
		podCIDR: netip.MustParsePrefix(fmt.Sprintf("198.18.%d.0/24", 64+i))}
	for _, d := range []string{"bin", "state", "wireguard", "records", "work"} {
		if err := os.MkdirAll(filepath.Join(n.dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A node has wireguard-go installed (no kernel WireGuard here).
	if err := os.Symlink(wgdevice.Binary(t), filepath.Join(n.dir, "bin", "wireguard-go")); err != nil {
		t.Fatal(err)
	}
	if gpu {
		// nvidia-smi as an H100 machine prints it for the agent's query.
		writeFile(t, filepath.Join(n.dir, "bin", "nvidia-smi"), "#!/bin/sh\necho '0, NVIDIA H100 80GB HBM3, 81559, GPU-"+hostname+"-0000-1111-2222, 550.54.15'\n", 0o755)
		n.writeK3sStandIn()
	}
	return n
}

// writeK3sStandIn puts the k3s stand-in on the machine's PATH: it
// registers the Node with n.podCIDR, with the kubelet's credential, which
// the node authorizer and NodeRestriction hold to that Node.
func (n *node) writeK3sStandIn() {
	t := n.t
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, ipamKubeconfig := filepath.Join(n.dir, "kubelet.kubeconfig"), filepath.Join(n.dir, "ipam.kubeconfig")
	writeNodeKubeconfig(t, n.m.tc, n.hostname, kubeconfig)
	writeAdminKubeconfig(t, n.m.tc, ipamKubeconfig)
	writeFile(t, filepath.Join(n.dir, "bin", "k3s"), fmt.Sprintf("#!/bin/sh\nexport %s=k3s %s=%q %s=%q %s=%q %s=%q %s=%q %s=%q %s=%q\nexec %q \"$@\"\n",
		standInEnv, standInDir, filepath.Join(n.dir, "records"), standInPodCIDR, n.podCIDR, standInKubeconfig, kubeconfig,
		standInIPAMKubeconfig, ipamKubeconfig, standInK3sToken, e2eK3sToken, standInImageSum, n.m.imageSum, standInImageName, e2eImageName, self), 0o755)
}

// run runs a shell command as the machine: in its network namespace, with
// its hostname and its own /usr/local/bin, /var/lib/gridweave and
// /run/wireguard. It returns the exit code, stdout and stderr.
func (n *node) run(command string) (int, string, string) {
	n.t.Helper()
	cmd := n.command(command)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if err != nil {
		code = -1
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
	}
	return code, stdout.String(), stderr.String()
}

// command is a shell command that runs as the machine (see run).
func (n *node) command(command string) *exec.Cmd {
	if n.machine != nil {
		return n.machineCommand(command)
	}
	script := `set -e
hostname "$NODE_HOSTNAME"
mount --bind "$NODE_DIR/bin" /usr/local/bin
mount --bind "$NODE_DIR/state" /var/lib/gridweave
mount --bind "$NODE_DIR/wireguard" /run/wireguard
if [ -d /run/systemd ]; then mount -t tmpfs tmpfs /run/systemd; fi # the machine runs no systemd
cd "$NODE_DIR/work"
mkdir -p "$TMPDIR"
exec bash -c "$NODE_COMMAND"`
	cmd := n.ns.Command("unshare", "--mount", "--uts", "--propagation", "private", "sh", "-c", script)
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "NODE_HOSTNAME=" + n.hostname, "NODE_DIR=" + n.dir, "NODE_COMMAND=" + command,
		// The join command's mktemp -d makes its directory in the
		// machine's, not in the host's /tmp.
		"TMPDIR=" + filepath.Join(n.dir, "tmp")}
	return cmd
}

// machineCommand is command for a machine that runs a real node: in its
// namespaces (one mount namespace for all its processes, as on a real
// machine, with the machine's own /usr/local/bin, /var/lib/gridweave and
// /run/wireguard mounted once), under its hostname.
func (n *node) machineCommand(command string) *exec.Cmd {
	script := `set -e
hostname "$NODE_HOSTNAME"
mountpoint -q /usr/local/bin || mount --bind "$NODE_DIR/bin" /usr/local/bin
mountpoint -q /var/lib/gridweave || mount --bind "$NODE_DIR/state" /var/lib/gridweave
mkdir -p /run/wireguard
mountpoint -q /run/wireguard || mount --bind "$NODE_DIR/wireguard" /run/wireguard
cd "$NODE_DIR/work"
mkdir -p "$TMPDIR"
exec bash -c "$NODE_COMMAND"`
	cmd := n.machine.Exec(n.t, "unshare", "--uts", "sh", "-c", script)
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "NODE_HOSTNAME=" + n.hostname, "NODE_DIR=" + n.dir,
		"NODE_COMMAND=" + command, n.machine.OwnerEnv(), "TMPDIR=" + filepath.Join(n.dir, "tmp")}
	return cmd
}

// record reads one of the stand-in's records ("" when absent).
func (n *node) record(name string) string {
	raw, _ := os.ReadFile(filepath.Join(n.dir, "records", name))
	return string(raw)
}

// manInTheMiddle puts the master's underlay address on the machine's own
// loopback, so that everything the machine sends to the master reaches
// instead a TLS server with a key pair of its own that relays each
// request to the real master: someone on the path. It returns the count
// of requests it relayed.
func (n *node) manInTheMiddle(port int) *atomic.Int64 {
	t := n.t
	t.Helper()
	n.ns.IP(t, "address", "add", masterUnderIP+"/32", "dev", "lo")
	dir := t.TempDir()
	kp, err := tlspin.LoadOrCreate(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), []netip.Addr{netip.MustParseAddr(masterUnderIP)})
	if err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	if err := n.ns.Do(func() (err error) {
		ln, err = net.Listen("tcp", netip.AddrPortFrom(netip.MustParseAddr(masterUnderIP), uint16(port)).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	relayed := new(atomic.Int64)
	target, _ := url.Parse(n.m.url)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} // relays from the test's namespace
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		relayed.Add(1)
		proxy.ServeHTTP(w, r)
	}), TLSConfig: &tls.Config{Certificates: []tls.Certificate{kp.Certificate}}, ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { srv.Close() })
	return relayed
}

// echo sends a line to addr from inside the machine and reads it back.
func (n *node) echo(addr string) error { return netnstest.Echo(n.ns, addr) }

func echoIn(ns *netnstest.Namespace, addr string) error { return netnstest.Echo(ns, addr) }

func echoServer(t testing.TB, ns *netnstest.Namespace, addr string) {
	netnstest.EchoServer(t, ns, addr)
}

// within retries f every 250 ms until it succeeds or limit passes, and
// returns its last error.
func within(limit time.Duration, f func() error) error {
	deadline := time.Now().Add(limit)
	for {
		err := f()
		var final stopError
		if errors.As(err, &final) {
			return final.error
		}
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// stop makes within give up at once with err: nothing waiting longer
// would change.
func stop(err error) error { return stopError{err} }

type stopError struct{ error }

// forward accepts TCP on listen and relays each connection to target,
// until the test ends; it returns the address it listens on.
func forward(t testing.TB, listen, target string) string {
	return forwardTo(t, listen, func() string { return target })
}

// forwardTo is forward to the address target gives when a connection
// comes ("" closes it): one that is known only later.
func forwardTo(t testing.TB, listen string, target func() string) string {
	t.Helper()
	// Bound before the master's VPN address exists (the server makes
	// its device), and kept across the server's restarts.
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var opErr error
		if err := c.Control(func(fd uintptr) { opErr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IP, unix.IP_FREEBIND, 1) }); err != nil {
			return err
		}
		return opErr
	}}
	ln, err := lc.Listen(context.Background(), "tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				to := target()
				if to == "" {
					return
				}
				up, err := net.DialTimeout("tcp", to, 5*time.Second)
				if err != nil {
					return
				}
				defer up.Close()
				go func() { _, _ = io.Copy(up, c); up.(*net.TCPConn).CloseWrite() }()
				_, _ = io.Copy(c, up)
			}()
		}
	}()
	return ln.Addr().String()
}

// freeUDPPortPair is a free UDP port whose next port is free too (the
// reflexive-address service's two), neither of them avoid.
func freeUDPPortPair(t testing.TB, avoid int) int {
	t.Helper()
	for range 100 {
		port := freeUDPPort(t)
		if port == 65535 || port == avoid || port+1 == avoid {
			continue
		}
		if c, err := net.ListenPacket("udp", ":"+strconv.Itoa(port+1)); err == nil {
			c.Close()
			return port
		}
	}
	t.Fatal("no two free UDP ports in a row")
	return 0
}

func freeUDPPort(t testing.TB) int {
	t.Helper()
	c, err := net.ListenPacket("udp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}

func freeTCPPort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func writeFile(t testing.TB, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// callersOf returns the remote addresses of the server's access-log lines
// for route ("POST /v1/nodes/register").
func (m *master) callersOf(route string) []string {
	var remotes []string
	for _, line := range strings.Split(m.logs(), "\n") {
		var entry struct{ Route, Remote string }
		if json.Unmarshal([]byte(line), &entry) == nil && entry.Route == route {
			remotes = append(remotes, entry.Remote)
		}
	}
	return remotes
}

// port is the public listener's port.
func (m *master) port() int {
	u, _ := url.Parse(m.url)
	p, _ := strconv.Atoi(u.Port())
	return p
}

// e2eStatic is the server as make server-static builds it, once per test
// binary.
var e2eStatic struct {
	once sync.Once
	path string
	err  error
}

func staticServer(t testing.TB) string {
	t.Helper()
	e2eStatic.once.Do(func() {
		dir, err := os.MkdirTemp("", "gridweave-e2e-static-")
		if err != nil {
			e2eStatic.err = err
			return
		}
		module, err := filepath.Abs("../..")
		if err != nil {
			e2eStatic.err = err
			return
		}
		e2eStatic.path = filepath.Join(dir, "gridweave-server")
		e2eStatic.err = image.BuildStatic(context.Background(), module, e2eStatic.path, e2eVersion)
	})
	if e2eStatic.err != nil {
		t.Fatal(e2eStatic.err)
	}
	return e2eStatic.path
}

// deployedEnv is the environment the systemd unit gives the server: its
// Environment= lines (%d: the credentials directory creds) and the
// variables of server.env.example, as shipped.
func deployedEnv(t testing.TB, creds string) []string {
	t.Helper()
	var env []string
	example, err := fs.ReadFile(deploy.Files, "systemd/server.env.example")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(example), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			env = append(env, line)
		}
	}
	unit, err := fs.ReadFile(deploy.Files, "systemd/gridweave-server.service")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(unit), "\n") {
		if rest, ok := strings.CutPrefix(line, "Environment="); ok {
			for _, kv := range strings.Fields(rest) {
				env = append(env, strings.ReplaceAll(kv, "%d", creds))
			}
		}
	}
	return env
}

func copyFile(t testing.TB, from, to string) {
	t.Helper()
	raw, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, to, string(raw), 0o600)
}

// writeNodeKubeconfig writes a kubeconfig with the credential of Node
// name's kubelet (system:node:<name>) on tc.
// writeAdminKubeconfig writes tc's administrator's kubeconfig to path:
// the k3s stand-in's pod CIDR allocator (k3s's server) uses it.
func writeAdminKubeconfig(t testing.TB, tc *testcluster.Cluster, path string) {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["testcluster"] = &clientcmdapi.Cluster{Server: tc.Config.Host, CertificateAuthorityData: tc.Config.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: tc.Config.BearerToken}
	kc.Contexts["admin"] = &clientcmdapi.Context{Cluster: "testcluster", AuthInfo: "admin"}
	kc.CurrentContext = "admin"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
}

func writeNodeKubeconfig(t testing.TB, tc *testcluster.Cluster, name, path string) {
	t.Helper()
	cfg, err := tc.NodeConfig(name)
	if err != nil {
		t.Fatal(err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["testcluster"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["kubelet"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["kubelet"] = &clientcmdapi.Context{Cluster: "testcluster", AuthInfo: "kubelet"}
	kc.CurrentContext = "kubelet"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
}
