package raytest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"gridweave.dev/internal/childproc"
	"gridweave.dev/internal/testcluster"
)

// NodeOptions describe one Ray node.
type NodeOptions struct {
	// Venv holds Ray; required.
	Venv *Venv
	// NetNS is the network namespace to run in (by `ip netns exec`);
	// required: Ray's GCS and raylet listen on every address of their
	// namespace and run whatever they are sent, so a node never runs in the
	// host's.
	NetNS string
	// Hostname, if set, is the node's host name (a UTS namespace of its
	// own), as a machine of its own would have.
	Hostname string
	// IP is the address the node advertises; required. Ray replaces
	// 127.0.0.1 with the host's own address, so a node on loopback takes
	// another 127/8 address.
	IP string
	// HeadAddress is the GCS address (ip:port) of the head to join; empty
	// starts a head, with its dashboard on IP.
	HeadAddress string
	// DashboardPort is a head's dashboard port; default a free one.
	DashboardPort int
	// NumCPUs and NumGPUs are the node's logical CPUs (default 1) and GPUs.
	NumCPUs, NumGPUs int
	// Resources are custom resources, e.g. {"node:gpu-1": 1}.
	Resources map[string]float64
	// ObjectStoreBytes is the object store's size; default 200 MB.
	ObjectStoreBytes int64
	// Env is added to every Ray process's environment.
	Env []string
	// StartTimeout bounds the start; default 2 minutes.
	StartTimeout time.Duration
}

// Node is a running Ray node (`ray start --block` and everything it
// started, in one process group).
type Node struct {
	// ID names the node's processes (OwnerEnv=ray-<ID>).
	ID string
	// IP is the node's address; GCSAddress the head's GCS (ip:port).
	IP, GCSAddress string
	// DashboardURL is the head's dashboard (http://ip:port); empty on a
	// worker node.
	DashboardURL string
	// TempDir holds the node's session and logs.
	TempDir string

	cmd     *exec.Cmd
	log     *lockedWriter
	exited  chan struct{}
	stopped sync.Once
}

// StartNode starts a Ray node and waits until it serves: a head's
// dashboard answers and lists the head alive; a worker node is listed
// alive by its head (whose dashboard is headDashboard, checked when not
// empty).
func StartNode(ctx context.Context, opts NodeOptions, headDashboard string) (_ *Node, err error) {
	if opts.Venv == nil {
		return nil, errors.New("raytest: NodeOptions.Venv is required")
	}
	if opts.NetNS == "" {
		return nil, errors.New("raytest: NodeOptions.NetNS is required (Ray listens on every address of its network namespace)")
	}
	if opts.IP == "" || opts.IP == "127.0.0.1" {
		return nil, errors.New("raytest: NodeOptions.IP is required and not 127.0.0.1 (Ray would advertise the host's address instead)")
	}
	if opts.NumCPUs == 0 {
		opts.NumCPUs = 1
	}
	if opts.ObjectStoreBytes == 0 {
		opts.ObjectStoreBytes = 200 << 20
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	for attempt := 1; ; attempt++ {
		node, err := startNodeOnce(ctx, opts, headDashboard)
		// Ray's own start gives a raylet 30 s to register with the GCS
		// (and a head's start as long to read its node back from its
		// GCS), however loaded the machine; a node that missed it is
		// started again once, as a supervisor would.
		if err == nil || attempt == 2 || !errors.Is(err, errStartTimedOut) || ctx.Err() != nil {
			return node, err
		}
	}
}

// errStartTimedOut: ray start gave up waiting on its GCS, a raylet's
// registration or a head's read of its own node.
var errStartTimedOut = errors.New("raytest: ray start timed out waiting on the GCS")

func startNodeOnce(ctx context.Context, opts NodeOptions, headDashboard string) (_ *Node, err error) {
	id := randomID()
	// Unix socket paths are limited to 107 bytes: keep the root short.
	temp, err := os.MkdirTemp("", "rt-"+id[:6]+"-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(temp)
		}
	}()
	ports, err := testcluster.FreePorts(9)
	if err != nil {
		return nil, err
	}
	node := &Node{ID: id, IP: opts.IP, TempDir: temp, log: &lockedWriter{}, exited: make(chan struct{})}
	args := []string{"start", "--block", "--disable-usage-stats",
		"--node-ip-address=" + opts.IP,
		"--num-cpus=" + strconv.Itoa(opts.NumCPUs),
		"--num-gpus=" + strconv.Itoa(opts.NumGPUs),
		"--object-store-memory=" + strconv.FormatInt(opts.ObjectStoreBytes, 10),
		"--temp-dir=" + temp,
		"--node-manager-port=" + strconv.Itoa(ports[0]),
		"--object-manager-port=" + strconv.Itoa(ports[1]),
		"--dashboard-agent-listen-port=" + strconv.Itoa(ports[2]),
		"--dashboard-agent-grpc-port=" + strconv.Itoa(ports[3]),
		"--runtime-env-agent-port=" + strconv.Itoa(ports[4]),
		"--metrics-export-port=" + strconv.Itoa(ports[5]),
		// Workers bind ports the kernel picks, so nodes of parallel tests
		// never collide in Ray's default range.
		"--min-worker-port=0", "--max-worker-port=0",
	}
	if len(opts.Resources) > 0 {
		res, err := json.Marshal(opts.Resources)
		if err != nil {
			return nil, err
		}
		args = append(args, "--resources="+string(res))
	}
	if opts.HeadAddress == "" {
		if opts.DashboardPort != 0 {
			ports[7] = opts.DashboardPort
		}
		node.GCSAddress = net.JoinHostPort(opts.IP, strconv.Itoa(ports[6]))
		node.DashboardURL = "http://" + net.JoinHostPort(opts.IP, strconv.Itoa(ports[7]))
		headDashboard = node.DashboardURL
		args = append(args, "--head",
			"--port="+strconv.Itoa(ports[6]),
			"--dashboard-host="+opts.IP,
			"--dashboard-port="+strconv.Itoa(ports[7]),
			"--ray-client-server-port="+strconv.Itoa(ports[8]),
		)
	} else {
		node.GCSAddress = opts.HeadAddress
		args = append(args, "--address="+opts.HeadAddress)
	}

	name, argv := opts.Venv.Ray, args
	if opts.Hostname != "" {
		name, argv = "unshare", append([]string{"--uts", "sh", "-c", `hostname "$0" && exec "$@"`, opts.Hostname, opts.Venv.Ray}, args...)
	}
	if opts.NetNS != "" {
		name, argv = "ip", append([]string{"netns", "exec", opts.NetNS, name}, argv...)
	}
	node.cmd = exec.Command(name, argv...)
	node.cmd.Dir = temp
	node.cmd.Env = append(os.Environ(),
		"RAY_USAGE_STATS_ENABLED=0",
		testcluster.OwnerEnv+"=ray-"+id,
		"PATH="+filepath.Dir(opts.Venv.Python)+":"+os.Getenv("PATH"),
	)
	node.cmd.Env = append(node.cmd.Env, opts.Env...)
	node.cmd.Stdout, node.cmd.Stderr = node.log, node.log
	// Its own process group, so Stop reaches every process Ray starts; and
	// killed with the test process (Ray's reaper then ends the group), so
	// a test that panics or times out leaves no Ray behind.
	node.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	node.cmd.WaitDelay = 5 * time.Second // a leftover holding the output pipe does not stall Wait
	exited, err := childproc.Start(node.cmd)
	if err != nil {
		return nil, fmt.Errorf("raytest: start %s: %w", name, err)
	}
	go func() { <-exited; close(node.exited) }()
	if headDashboard != "" {
		if err := node.waitAlive(ctx, headDashboard); err != nil {
			logs := node.Logs(8 << 10)
			if strings.Contains(logs, "timed out during startup") || (strings.Contains(logs, "Failed to get node info") && strings.Contains(logs, "Deadline Exceeded")) {
				err = fmt.Errorf("%w: %w", errStartTimedOut, err)
			}
			err = fmt.Errorf("%w\n%s", err, logs)
			node.Stop()
			return nil, err
		}
	}
	return node, nil
}

// waitAlive polls the head's dashboard until it lists this node alive.
func (n *Node) waitAlive(ctx context.Context, dashboard string) error {
	client := &http.Client{Timeout: 5 * time.Second}
	var last error
	for {
		nodes, err := ListNodes(ctx, client, dashboard)
		if err == nil {
			for _, node := range nodes {
				if node.IP == n.IP && node.State == "ALIVE" {
					return nil
				}
			}
			err = fmt.Errorf("node %s not alive yet (%d nodes listed)", n.IP, len(nodes))
		}
		last = err
		select {
		case <-n.exited:
			return fmt.Errorf("raytest: ray start exited before node %s was alive", n.IP)
		case <-ctx.Done():
			return fmt.Errorf("raytest: node %s: %w (last: %v)", n.IP, ctx.Err(), last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// NodeState is one node as Ray's state API lists it.
type NodeState struct {
	NodeID         string             `json:"node_id"`
	IP             string             `json:"node_ip"`
	State          string             `json:"state"` // ALIVE or DEAD
	IsHead         bool               `json:"is_head_node"`
	ResourcesTotal map[string]float64 `json:"resources_total"`
}

// ListNodes returns Ray's own node list (GET /api/v0/nodes).
func ListNodes(ctx context.Context, client *http.Client, dashboard string) ([]NodeState, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, dashboard+"/api/v0/nodes?limit=1000&detail=1", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out struct {
		Result bool   `json:"result"`
		Msg    string `json:"msg"`
		Data   struct {
			Result struct {
				Result []NodeState `json:"result"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("GET /api/v0/nodes: %d: %w", resp.StatusCode, err)
	}
	if !out.Result {
		return nil, fmt.Errorf("GET /api/v0/nodes: %s", out.Msg)
	}
	return out.Data.Result.Result, nil
}

// Logs returns the end of the node's `ray start` output and of its
// session's error logs.
func (n *Node) Logs(max int) string {
	var b strings.Builder
	out := n.log.String()
	if len(out) > max {
		out = out[len(out)-max:]
	}
	fmt.Fprintf(&b, "--- ray start (%s) ---\n%s\n", n.IP, out)
	for _, name := range []string{"raylet.err", "gcs_server.err", "dashboard.err"} {
		data, err := os.ReadFile(filepath.Join(n.TempDir, "session_latest", "logs", name))
		if err != nil || len(bytes.TrimSpace(data)) == 0 {
			continue
		}
		if len(data) > max {
			data = data[len(data)-max:]
		}
		fmt.Fprintf(&b, "--- %s ---\n%s\n", name, data)
	}
	return b.String()
}

// Kill ends the node at once (SIGKILL to every process it started), as a
// machine that loses power would.
func (n *Node) Kill() {
	_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
	n.reap()
}

// Stop ends the node: SIGTERM to its process group, SIGKILL after 15 s,
// then any process that carries its owner mark; its temp dir is removed.
func (n *Node) Stop() {
	n.stopped.Do(func() {
		_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-n.exited:
		case <-time.After(15 * time.Second):
		}
		n.reap()
		_ = os.RemoveAll(n.TempDir)
	})
}

// reap kills what is left of the node: its process group, and processes
// that left the group but carry its owner mark.
func (n *Node) reap() {
	_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
	<-n.exited
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		left, err := testcluster.Leftovers("ray-" + n.ID)
		if err != nil || len(left) == 0 {
			return
		}
		for _, p := range left {
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func randomID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

type lockedWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
