package kubeletnode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The machine's own directories the kubelet and the CNI plugins write to
// whatever their configuration says: Teardown removes what the node put
// there by name, and those of them Write found missing (createdFile lists
// them) once they are empty.
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
// left mounted below the node's directories, the pods' cgroups, the
// bridge, the pods' logs and every file Write and the processes wrote.
// What the machine had before, or another program put beside, is left as
// it was; a directory of the machine's that Write found missing goes only
// once empty.
func Teardown(ctx context.Context, c Config, log *slog.Logger) error {
	if err := c.defaults(); err != nil {
		return err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var errs []error
	var podLogs []string
	if _, err := os.Stat(c.containerdConfig()); err == nil {
		log.InfoContext(ctx, "removing the node's pods through containerd")
		podLogs, err = c.removePods(ctx, log)
		if err != nil {
			log.WarnContext(ctx, "removing the pods", "err", err)
			errs = append(errs, err)
		}
	}
	// A shim of the node's containerd that outlived its pod's removal
	// (the CRI failed) goes with its containers' cgroups below.
	killShims(c.Socket())
	own := []string{c.Dir, filepath.Join(c.runDir(), "containerd")}
	if err := unmountBelow(own...); err != nil {
		errs = append(errs, err)
	}
	if err := removePodCgroups(); err != nil {
		errs = append(errs, err)
	}
	if out, err := exec.CommandContext(ctx, "ip", "link", "del", bridgeName).CombinedOutput(); err != nil && !strings.Contains(string(out), "Cannot find device") {
		errs = append(errs, fmt.Errorf("ip link del %s: %v: %s", bridgeName, err, strings.TrimSpace(string(out))))
	}
	// The kubelet's and the CNI plugins' files outside the node's
	// directories: theirs by name.
	remove := []string{filepath.Join("/var/lib/cni/networks", networkName), filepath.Join(c.runDir(), "node.pid"),
		"/var/lib/kubelet/device-plugins/kubelet.sock", "/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint"}
	results, _ := filepath.Glob("/var/lib/cni/results/" + networkName + "-*")
	remove = append(remove, results...)
	for _, p := range podLogs {
		remove = append(remove, filepath.Join("/var/log/pods", p))
	}
	if links, _ := filepath.Glob("/var/log/containers/*.log"); len(links) > 0 {
		for _, l := range links {
			target, err := os.Readlink(l)
			for _, p := range podLogs {
				if err == nil && strings.HasPrefix(target, filepath.Join("/var/log/pods", p)+"/") {
					remove = append(remove, l)
				}
			}
		}
	}
	for _, path := range remove {
		if err := os.RemoveAll(path); err != nil {
			errs = append(errs, err)
		}
	}
	// The node's own directories, unless something is still mounted
	// below them: RemoveAll would go into it.
	if left := mountsBelow(own...); len(left) > 0 {
		errs = append(errs, fmt.Errorf("kubeletnode: still mounted below the node's directories, so they stay: %s", strings.Join(left, ", ")))
	} else {
		for _, dir := range own[1:] {
			if err := os.RemoveAll(dir); err != nil {
				errs = append(errs, err)
			}
		}
		if raw, err := os.ReadFile(c.createdFile()); err == nil {
			var created []string
			if json.Unmarshal(raw, &created) == nil {
				removeEmptyMachineDirs(created)
			}
		}
		if err := os.RemoveAll(c.Dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// killShims kills the containerd shims serving the containerd at socket:
// their command line names it and they share this process's mount
// namespace, where that path is this node's socket. A containerd of
// another mount namespace (a container's, a nested node's) may have a
// socket of the same path that is not this one: its shims are not ours.
func killShims(socket string) {
	ownMounts, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		return
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		raw, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if mounts, err := os.Readlink(filepath.Join(filepath.Dir(p), "ns", "mnt")); err != nil || mounts != ownMounts {
			continue
		}
		args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		if len(args) == 0 || !strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") {
			continue
		}
		for i, a := range args {
			if a == "-address" && i+1 < len(args) && args[i+1] == socket {
				if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
	}
}

// removeEmptyMachineDirs removes the directories of machineDirs that
// Write found missing (created), and their subdirectories, where empty:
// what another program put there since stays.
func removeEmptyMachineDirs(created []string) {
	for _, d := range created {
		if !slices.Contains(machineDirs, d) {
			continue
		}
		var dirs []string
		_ = filepath.WalkDir(d, func(path string, e os.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- { // deepest first
			_ = syscall.Rmdir(dirs[i]) // fails, and stays, when not empty
		}
	}
}

// removePods starts containerd (its supervisor is stopped), removes every
// pod sandbox through the CRI, and stops it again.
func (c Config) removePods(ctx context.Context, log *slog.Logger) (podLogs []string, err error) {
	logFile, err := os.OpenFile(filepath.Join(c.Dir, "containerd-teardown.log"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	argv := c.ContainerdCommand()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("kubeletnode: start containerd to remove the pods: %w", err)
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
		return nil, fmt.Errorf("kubeletnode: containerd, to remove the pods: %w", err)
	}
	conn, err := grpc.NewClient("unix://"+c.Socket(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	rt := runtimeapi.NewRuntimeServiceClient(conn)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	// The CRI answers "not initialized" for a moment after the socket is
	// there.
	var pods *runtimeapi.ListPodSandboxResponse
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if pods, err = rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{}); err == nil {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("kubeletnode: list the pods: %w", err)
		}
	}
	var errs []error
	for _, p := range pods.Items {
		if m := p.Metadata; m != nil {
			// The kubelet's log directory of the pod (kuberuntime's
			// BuildPodLogsDirectory).
			podLogs = append(podLogs, m.Namespace+"_"+m.Name+"_"+m.Uid)
		}
		if _, err := rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: p.Id}); err != nil {
			errs = append(errs, fmt.Errorf("stop pod %s/%s: %w", p.Metadata.GetNamespace(), p.Metadata.GetName(), err))
			continue
		}
		if _, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: p.Id}); err != nil {
			errs = append(errs, fmt.Errorf("remove pod %s/%s: %w", p.Metadata.GetNamespace(), p.Metadata.GetName(), err))
		}
	}
	log.InfoContext(ctx, "pods removed", "count", len(pods.Items))
	return podLogs, errors.Join(errs...)
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
// containerd's snapshots and sandboxes' shm).
func unmountBelow(roots ...string) error {
	points := mountsBelow(roots...)
	slices.SortStableFunc(points, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	var errs []error
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// mountsBelow lists the mount points strictly below the roots, as the
// kernel names them (symbolic links in the roots resolved).
func mountsBelow(roots ...string) []string {
	var prefixes []string
	for _, r := range roots {
		if resolved, err := filepath.EvalSymlinks(r); err == nil {
			r = resolved
		}
		prefixes = append(prefixes, strings.TrimRight(r, "/")+"/")
	}
	raw, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var points []string
	for _, line := range strings.Split(string(raw), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 5 {
			continue
		}
		point := unescapeMount(fields[4])
		for _, p := range prefixes {
			if strings.HasPrefix(point, p) {
				points = append(points, point)
				break
			}
		}
	}
	return points
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

// removePodCgroups removes the node's cgroups (CgroupRoot, its kubepods,
// the QoS classes, the pods'), deepest first, in every cgroup v1
// hierarchy; on a cgroup v2 host, the kubelet's kubepods. A process still in one (a container the CRI could not
// stop) is killed first: nothing of the node outlives it.
func removePodCgroups() error {
	var roots []string
	if CgroupV1() {
		roots, _ = filepath.Glob("/sys/fs/cgroup/*/" + CgroupRoot)
	} else if _, err := os.Stat("/sys/fs/cgroup/kubepods"); err == nil {
		roots = []string{"/sys/fs/cgroup/kubepods"}
	}
	var dirs []string
	for _, root := range roots {
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		pids := cgroupPids(dirs)
		if len(pids) == 0 || time.Now().After(deadline) {
			break
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Deepest first: a path's children sort after it, in every hierarchy.
	slices.SortFunc(dirs, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	var errs []error
	for _, dir := range dirs {
		var err error
		for {
			// A process that just died may still be counted a moment.
			if err = syscall.Rmdir(dir); err == nil || errors.Is(err, os.ErrNotExist) || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove the cgroup %s: %w", dir, err))
		}
	}
	return errors.Join(errs...)
}

// cgroupPids lists the processes of the cgroups dirs.
func cgroupPids(dirs []string) []int {
	var pids []int
	for _, dir := range dirs {
		raw, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(raw)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}
