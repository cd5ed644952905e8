package benchgoals

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// JoinRun is what joinload reports of one run.
type JoinRun struct {
	PerSec, FirstTenth, LastTenth float64
}

var joinloadLine = regexp.MustCompile(`(\d+) joins in \S+: (\d+) joins/s; first tenth (\d+)/s, last tenth (\d+)/s`)

// ParseJoinload reads joinload's report line.
func ParseJoinload(out string) (JoinRun, error) {
	m := joinloadLine.FindStringSubmatch(out)
	if m == nil {
		return JoinRun{}, fmt.Errorf("no joinload report in %q", tail(out, 500))
	}
	var r JoinRun
	r.PerSec, _ = strconv.ParseFloat(m[2], 64)
	r.FirstTenth, _ = strconv.ParseFloat(m[3], 64)
	r.LastTenth, _ = strconv.ParseFloat(m[4], 64)
	return r, nil
}

// JoinOptions say what a join run measures.
type JoinOptions struct {
	Nodes int
	GPUs  bool
	// WireGuard runs the server with a wireguard-go device (WG_INTERFACE)
	// instead of the in-memory mesh, the server and joinload in a network
	// namespace of their own (root).
	WireGuard bool
}

// Joins runs the server binary on its defaults with TLS=off, SQLite and
// the embedded cluster (WG_INTERFACE=none, or a wireguard-go device),
// and joinload against it with 16 clients.
func (r *Runner) Joins(ctx context.Context, o JoinOptions) (JoinRun, error) {
	dir, err := os.MkdirTemp("", "gridweave-benchgoals-")
	if err != nil {
		return JoinRun{}, err
	}
	defer os.RemoveAll(dir)
	server, load := filepath.Join(dir, "server"), filepath.Join(dir, "joinload")
	for bin, pkg := range map[string]string{server: "./examples/server", load: "./examples/joinload"} {
		if _, err := r.run(ctx, "go", "build", "-o", bin, pkg); err != nil {
			return JoinRun{}, err
		}
	}
	// inNS runs a command in the run's network namespace, if any.
	inNS := func(name string, args ...string) (string, []string) { return name, args }
	env := []string{"WG_INTERFACE=none"}
	if o.WireGuard {
		ns := fmt.Sprintf("gwbench-%d", os.Getpid())
		if _, err := r.run(ctx, "ip", "netns", "add", ns); err != nil {
			return JoinRun{}, err
		}
		defer func() { _, _ = r.run(context.Background(), "ip", "netns", "del", ns) }()
		if _, err := r.run(ctx, "ip", "-n", ns, "link", "set", "lo", "up"); err != nil {
			return JoinRun{}, err
		}
		inNS = func(name string, args ...string) (string, []string) {
			return "ip", append([]string{"netns", "exec", ns, name}, args...)
		}
		env = []string{"WG_INTERFACE=gwbench0", "WG_PORT=51820", "MASTER_VPN_IP=198.18.0.1", "VPN_CIDR=198.18.0.0/16", "CLUSTER_CIDR=198.19.0.0/17", "SERVICE_CIDR=198.19.128.0/17"}
	}
	port, err := freePort()
	if err != nil {
		return JoinRun{}, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	const token = "benchgoals-admin-token-0123456789"
	name, args := inNS(server, "--addr", addr)
	srv := exec.CommandContext(ctx, name, args...)
	srv.Env = append(append(os.Environ(), "TLS=off", "KUBERAY_DB="+filepath.Join(dir, "db", "kuberay.db"),
		"ADMIN_TOKEN="+token, "JWT_SECRET="+strings.Repeat("j", 40), "RATE_LIMIT_PER_MINUTE=100000000", "KUBECONFIG="), env...)
	log, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return JoinRun{}, err
	}
	defer log.Close()
	srv.Stdout, srv.Stderr = log, log
	if err := srv.Start(); err != nil {
		return JoinRun{}, err
	}
	defer func() {
		// Stopped as a service manager stops it, so it removes its
		// WireGuard device and UAPI socket (in the host's /run).
		_ = srv.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = srv.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = srv.Process.Kill()
			<-done
		}
		if o.WireGuard {
			_ = os.Remove("/run/wireguard/gwbench0.sock")
		}
	}()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		name, args := inNS("curl", "-sf", "-o", "/dev/null", "http://"+addr+"/healthz")
		if exec.CommandContext(ctx, name, args...).Run() == nil {
			break
		}
		if time.Now().After(deadline) {
			raw, _ := os.ReadFile(filepath.Join(dir, "server.log"))
			return JoinRun{}, fmt.Errorf("the server did not answer within 30 s: %s", tail(string(raw), 1000))
		}
	}
	loadArgs := []string{"--url", "http://" + addr, "--token", token, "--nodes", strconv.Itoa(o.Nodes), "--clients", "16"}
	if o.GPUs {
		loadArgs = append(loadArgs, "--gpus")
	}
	name, args = inNS(load, loadArgs...)
	out, err := r.run(ctx, name, args...)
	if err != nil {
		return JoinRun{}, err
	}
	return ParseJoinload(string(out))
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
