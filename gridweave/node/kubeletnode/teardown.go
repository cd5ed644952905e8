package kubeletnode

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The machine's own directories the kubelet and the CNI plugins write to
// whatever their configuration says: Teardown removes those Write found
// missing (createdFile lists them), and leaves alone those the machine
// had.
var machineDirs = []string{"/var/lib/kubelet", "/var/log/pods", "/var/log/containers", "/var/lib/cni"}

func (c Config) createdFile() string { return filepath.Join(c.Dir, "created.json") }

// recordCreated notes which of machineDirs the machine lacks before the
// node first runs (a later Write keeps the first record).
func (c Config) recordCreated() error {
	if _, err := os.Stat(c.createdFile()); err == nil {
		return nil
	}
	var missing []string
	for _, d := range machineDirs {
		if _, err := os.Stat(d); errors.Is(err, os.ErrNotExist) {
			missing = append(missing, d)
		}
	}
	raw, _ := json.Marshal(missing)
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return err
	}
	return os.WriteFile(c.createdFile(), raw, 0o600)
}

// Teardown takes the node away once Supervise stopped: every pod goes
// through containerd's CRI (their containers stopped, their addresses
// released, their network namespaces and mounts removed), then what is
// left mounted under the node's directories, the pods' cgroups, the
// bridge, and every file Write and the processes wrote. What the machine
// had before is left as it was.
func Teardown(ctx context.Context, c Config, log *slog.Logger) error {
	if err := c.defaults(); err != nil {
		return err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var errs []error
	if _, err := os.Stat(c.containerdConfig()); err == nil {
		if err := c.removePods(ctx, log); err != nil {
			errs = append(errs, err)
		}
	}
	if err := unmountBelow(c.Dir, filepath.Join(c.runDir(), "containerd")); err != nil {
		errs = append(errs, err)
	}
	if err := removePodCgroups(); err != nil {
		errs = append(errs, err)
	}
	if out, err := exec.CommandContext(ctx, "ip", "link", "del", bridgeName).CombinedOutput(); err != nil && !strings.Contains(string(out), "Cannot find device") {
		errs = append(errs, fmt.Errorf("ip link del %s: %v: %s", bridgeName, err, strings.TrimSpace(string(out))))
	}
	remove := []string{filepath.Join("/var/lib/cni/networks", networkName), filepath.Join(c.runDir(), "containerd"), filepath.Join(c.runDir(), "node.pid")}
	if results, _ := filepath.Glob("/var/lib/cni/results/" + networkName + "-*"); len(results) > 0 {
		remove = append(remove, results...)
	}
	if raw, err := os.ReadFile(c.createdFile()); err == nil {
		var created []string
		if json.Unmarshal(raw, &created) == nil {
			for _, d := range created {
				if slices.Contains(machineDirs, d) {
					remove = append(remove, d)
				}
			}
		}
	}
	remove = append(remove, c.Dir)
	for _, path := range remove {
		if err := os.RemoveAll(path); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removePods starts containerd (its supervisor is stopped), removes every
// pod sandbox through the CRI, and stops it again.
func (c Config) removePods(ctx context.Context, log *slog.Logger) error {
	logFile, err := os.OpenFile(filepath.Join(c.Dir, "containerd-teardown.log"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer logFile.Close()
	argv := c.ContainerdCommand()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("kubeletnode: start containerd to remove the pods: %w", err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}()
	if err := waitForSocket(ctx, c.Socket(), 30*time.Second); err != nil {
		return fmt.Errorf("kubeletnode: containerd, to remove the pods: %w", err)
	}
	conn, err := grpc.NewClient("unix://"+c.Socket(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	rt := runtimeapi.NewRuntimeServiceClient(conn)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	pods, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return fmt.Errorf("kubeletnode: list the pods: %w", err)
	}
	var errs []error
	for _, p := range pods.Items {
		if _, err := rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: p.Id}); err != nil {
			errs = append(errs, fmt.Errorf("stop pod %s/%s: %w", p.Metadata.GetNamespace(), p.Metadata.GetName(), err))
			continue
		}
		if _, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: p.Id}); err != nil {
			errs = append(errs, fmt.Errorf("remove pod %s/%s: %w", p.Metadata.GetNamespace(), p.Metadata.GetName(), err))
		}
	}
	log.InfoContext(ctx, "pods removed", "count", len(pods.Items))
	return errors.Join(errs...)
}

func waitForSocket(ctx context.Context, path string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		if fi, err := os.Stat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no socket %s after %s", path, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// unmountBelow unmounts every mount point strictly below the roots,
// deepest first (the kubelet's volumes and its root's bind of itself,
// containerd's snapshots and sandboxes' shm), and the network namespaces
// containerd's CNI made (/run/netns/cni-*).
func unmountBelow(roots ...string) error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	var points []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		point := unescapeMount(fields[4])
		if strings.HasPrefix(point, "/run/netns/cni-") || strings.HasPrefix(point, "/var/run/netns/cni-") {
			points = append(points, point)
			continue
		}
		for _, root := range roots {
			if strings.HasPrefix(point, strings.TrimRight(root, "/")+"/") {
				points = append(points, point)
				break
			}
		}
	}
	f.Close()
	if err := sc.Err(); err != nil {
		return err
	}
	slices.SortStableFunc(points, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	var errs []error
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &v); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// removePodCgroups removes the kubelet's cgroups (kubepods, the QoS
// classes, the pods'), deepest first, in every cgroup v1 hierarchy and in
// the v2 one; they are empty once the pods are gone.
func removePodCgroups() error {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods")
	if _, err := os.Stat("/sys/fs/cgroup/kubepods"); err == nil {
		roots = append(roots, "/sys/fs/cgroup/kubepods")
	}
	var errs []error
	for _, root := range roots {
		var dirs []string
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			var err error
			for range 50 { // a process that just died may still be counted
				if err = syscall.Rmdir(dirs[i]); err == nil || errors.Is(err, os.ErrNotExist) {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove the cgroup %s: %w", dirs[i], err))
			}
		}
	}
	return errors.Join(errs...)
}
