package benchgoals

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
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

// Joins runs the server binary on its defaults with TLS=off,
// WG_INTERFACE=none, SQLite and the embedded cluster, and joinload
// against it with 16 clients: nodes machines, with GPUs or without.
func (r *Runner) Joins(ctx context.Context, nodes int, gpus bool) (JoinRun, error) {
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
	port, err := freePort()
	if err != nil {
		return JoinRun{}, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	const token = "benchgoals-admin-token-0123456789"
	srv := exec.CommandContext(ctx, server, "--addr", addr)
	srv.Env = append(os.Environ(), "TLS=off", "WG_INTERFACE=none", "KUBERAY_DB="+filepath.Join(dir, "db", "kuberay.db"),
		"ADMIN_TOKEN="+token, "JWT_SECRET="+strings.Repeat("j", 40), "RATE_LIMIT_PER_MINUTE=100000000", "KUBECONFIG=")
	log, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return JoinRun{}, err
	}
	defer log.Close()
	srv.Stdout, srv.Stderr = log, log
	if err := srv.Start(); err != nil {
		return JoinRun{}, err
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			return JoinRun{}, fmt.Errorf("the server did not answer within 30 s")
		}
	}
	args := []string{"--url", "http://" + addr, "--token", token, "--nodes", strconv.Itoa(nodes), "--clients", "16"}
	if gpus {
		args = append(args, "--gpus")
	}
	out, err := r.run(ctx, load, args...)
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
