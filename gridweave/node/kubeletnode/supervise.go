package kubeletnode

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// SaveConfig keeps c beside what Write wrote (node.json, 0600; the
// credentials stay in their own files), for Supervise and Teardown in a
// later process (`join-node --run-node`, `--leave`).
func SaveConfig(c Config) error {
	if err := c.defaults(); err != nil {
		return err
	}
	raw, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(c.Dir, "node.json"), raw, 0o600)
}

// LoadConfig reads what SaveConfig kept in dir; os.ErrNotExist when the
// machine runs no node.
func LoadConfig(dir string) (Config, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "node.json"))
	if err != nil {
		return Config{}, err
	}
	var c Config
	if err := json.Unmarshal(raw, &c); err != nil {
		return Config{}, fmt.Errorf("kubeletnode: %s: %w", filepath.Join(dir, "node.json"), err)
	}
	c.Dir = dir // where it was found, whatever the file says
	return c, c.defaults()
}

// PIDFile holds the pid of the running Supervise.
func (c Config) PIDFile() string { return filepath.Join(c.runDir(), "node.pid") }

// Supervise runs the node until ctx ends: containerd, then the kubelet,
// each started again (after a pause that grows to 30 s) whenever it
// exits; and, once the controller-manager gave the Node its pod CIDR
// (read with the kubelet's own credential, and taken only inside the
// cluster's pod range), the pod network's configuration for it. When ctx
// ends the kubelet stops, then containerd; the pods keep running in
// their shims, for a Supervise started again (Teardown removes them).
// Only one Supervise runs per node.
func Supervise(ctx context.Context, c Config, log *slog.Logger) error {
	if err := c.defaults(); err != nil {
		return err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	lock, err := os.OpenFile(filepath.Join(c.Dir, "supervise.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return errors.New("kubeletnode: the node's supervisor runs already")
	}
	if err := os.MkdirAll(c.runDir(), 0o755); err != nil {
		return err
	}
	if err := makeCgroupRoot(); err != nil {
		return err
	}
	self := os.Getpid()
	if err := os.WriteFile(c.PIDFile(), []byte(fmt.Sprintf("%d %s\n", self, startTime(self))), 0o644); err != nil {
		return err
	}
	defer os.Remove(c.PIDFile())

	containerdCtx, stopContainerd := context.WithCancel(context.WithoutCancel(ctx))
	kubeletCtx, stopKubelet := context.WithCancel(context.WithoutCancel(ctx))
	var containerd, kubelet sync.WaitGroup
	containerd.Go(func() {
		keepRunning(containerdCtx, "containerd", func() ([]string, error) { return c.ContainerdCommand(), nil }, filepath.Join(c.Dir, "containerd.log"), log)
	})
	if err := waitForSocket(ctx, c.Socket(), time.Minute); err != nil {
		log.WarnContext(ctx, "containerd has no socket yet; the kubelet starts anyway and waits", "err", err)
	}
	kubelet.Go(func() {
		keepRunning(kubeletCtx, "kubelet", c.KubeletCommand, filepath.Join(c.Dir, "kubelet.log"), log)
	})
	c.followPodCIDR(ctx, log)
	stopKubelet()
	kubelet.Wait()
	stopContainerd()
	containerd.Wait()
	return nil
}

// makeCgroupRoot makes CgroupRoot in every cgroup v1 hierarchy (the
// kubelet needs its cgroupRoot there), cpuset's with its parent's CPUs and
// memory nodes. Nothing on a cgroup v2 host.
func makeCgroupRoot() error {
	if !CgroupV1() {
		return nil
	}
	hierarchies, err := filepath.Glob("/sys/fs/cgroup/*")
	if err != nil {
		return err
	}
	for _, h := range hierarchies {
		if _, err := os.Stat(filepath.Join(h, "cgroup.procs")); err != nil || filepath.Base(h) == "unified" {
			continue // not a hierarchy's root (a symlink such as cpu,cpuacct is one of them)
		}
		dir := filepath.Join(h, CgroupRoot)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("kubeletnode: the pods' cgroup %s: %w", dir, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if v, err := os.ReadFile(filepath.Join(h, f)); err == nil {
				if cur, _ := os.ReadFile(filepath.Join(dir, f)); len(strings.TrimSpace(string(cur))) == 0 {
					if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
						return fmt.Errorf("kubeletnode: %s: %w", filepath.Join(dir, f), err)
					}
				}
			}
		}
	}
	return nil
}

// keepRunning runs the argv command gives, output appended to logPath,
// until ctx ends, starting it again (command asked again) whenever it
// exits or command refuses.
func keepRunning(ctx context.Context, name string, command func() ([]string, error), logPath string, log *slog.Logger) {
	pause := time.Second
	for ctx.Err() == nil {
		started := time.Now()
		argv, err := command()
		if err == nil {
			err = run(ctx, argv, logPath)
		}
		if ctx.Err() != nil {
			return
		}
		if time.Since(started) > time.Minute {
			pause = time.Second
		}
		if argv == nil {
			log.ErrorContext(ctx, name+" not started; trying again", "err", err, "after", pause)
		} else {
			log.WarnContext(ctx, name+" exited; starting it again", "err", err, "after", pause, "log", logPath)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, 30*time.Second)
	}
}

// run runs argv until it exits or ctx ends (then SIGTERM), its output
// appended to logPath.
func run(ctx context.Context, argv []string, logPath string) error {
	out, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("the log %s: %w", logPath, err)
	}
	defer out.Close()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 20 * time.Second
	return cmd.Run()
}

// followPodCIDR writes the pod network's configuration once the Node has
// its pod CIDR, and again if it changes, until ctx ends.
func (c Config) followPodCIDR(ctx context.Context, log *slog.Logger) {
	var written netip.Prefix
	for {
		every := 2 * time.Second
		podCIDR, err := c.NodePodCIDR(ctx)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				log.DebugContext(ctx, "the Node's pod CIDR", "err", err)
			}
		case podCIDR.IsValid() && podCIDR != written:
			if err := c.WriteCNI(podCIDR); err != nil {
				log.ErrorContext(ctx, "the pod network's configuration", "pod_cidr", podCIDR, "err", err)
				break
			}
			written = podCIDR
			log.InfoContext(ctx, "pod network configured", "pod_cidr", podCIDR, "bridge", bridgeName)
		}
		if written.IsValid() {
			every = 30 * time.Second
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}

// NodePodCIDR reads the Node's pod CIDR with the kubelet's own client
// certificate (the node authorizer lets it read its Node): the zero
// Prefix while the Node has none. A pod CIDR outside the cluster's pod
// range, or of another length than a node's, is an error: it is not
// routed, so it is not used.
func (c Config) NodePodCIDR(ctx context.Context) (netip.Prefix, error) {
	if err := c.defaults(); err != nil {
		return netip.Prefix{}, err
	}
	pair := filepath.Join(c.CertDir(), "kubelet-client-current.pem")
	cert, err := tls.LoadX509KeyPair(pair, pair)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("the kubelet's client certificate (not bootstrapped yet?): %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(c.CACertPEM) {
		return netip.Prefix{}, errors.New("kubeletnode: the cluster CA is not a PEM certificate")
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil,
		TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: c.TLSServerName, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}}
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(c.APIServer, "/")+"/api/v1/nodes/"+url.PathEscape(c.NodeName), nil)
	if err != nil {
		return netip.Prefix{}, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return netip.Prefix{}, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if resp.StatusCode == http.StatusNotFound {
		return netip.Prefix{}, nil // not registered yet
	}
	if resp.StatusCode != http.StatusOK {
		return netip.Prefix{}, fmt.Errorf("GET the Node %s: %s", c.NodeName, resp.Status)
	}
	var node struct {
		Spec struct {
			PodCIDR string `json:"podCIDR"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(body, &node); err != nil {
		return netip.Prefix{}, fmt.Errorf("the Node %s: %w", c.NodeName, err)
	}
	if node.Spec.PodCIDR == "" {
		return netip.Prefix{}, nil
	}
	p, err := netip.ParsePrefix(node.Spec.PodCIDR)
	if err != nil || p.Masked() != p {
		return netip.Prefix{}, fmt.Errorf("the Node's pod CIDR %q is not a prefix", node.Spec.PodCIDR)
	}
	if c.ClusterCIDR.IsValid() && (!c.ClusterCIDR.Contains(p.Addr()) || p.Bits() < c.ClusterCIDR.Bits()) {
		return netip.Prefix{}, fmt.Errorf("the Node's pod CIDR %s is outside the cluster's pod range %s: not used", p, c.ClusterCIDR)
	}
	if c.NodeCIDRMask > 0 && p.Bits() != c.NodeCIDRMask {
		return netip.Prefix{}, fmt.Errorf("the Node's pod CIDR %s is not a /%d: not used", p, c.NodeCIDRMask)
	}
	return p, nil
}

// StopSupervisor ends the running Supervise (SIGTERM to the pid in
// PIDFile) and waits for it to exit, at most limit; no supervisor
// running is fine.
func StopSupervisor(c Config, limit time.Duration) error {
	raw, err := os.ReadFile(c.PIDFile())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	fields := strings.Fields(string(raw))
	pid, err := strconv.Atoi(strings.Join(fields[:min(1, len(fields))], ""))
	if err != nil || pid <= 1 || len(fields) != 2 {
		return fmt.Errorf("kubeletnode: %s holds no pid and start time", c.PIDFile())
	}
	started := fields[1]
	isSupervisor := func() bool { return startTime(pid) == started }
	if !isSupervisor() {
		return nil // it died without removing its file
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	deadline := time.Now().Add(limit)
	for isSupervisor() {
		if time.Now().After(deadline) {
			return fmt.Errorf("kubeletnode: the supervisor (pid %d) did not stop within %s", pid, limit)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

// startTime is the start time of the process pid (field 22 of its stat,
// in clock ticks since boot), which tells it from a later process of the
// same pid; "" when it is gone or a zombie.
func startTime(pid int) string {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// The command name, field 2, may hold spaces: count after its ")".
	rest := string(raw)
	if i := strings.LastIndexByte(rest, ')'); i >= 0 {
		rest = rest[i+1:]
	}
	fields := strings.Fields(rest) // fields[0] is field 3, the state
	if len(fields) < 20 || fields[0] == "Z" {
		return ""
	}
	return fields[19]
}
