package realnode

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gridweave.dev/gridweave/node/kubeletnode"
	"gridweave.dev/internal/netnstest"
	"gridweave.dev/internal/testcluster"
)

// Hierarchies are the cgroup v1 hierarchies a machine gets a root in; the
// kubelet needs cpu, cpuacct, cpuset, memory, pids and systemd's.
var Hierarchies = []string{"cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "blkio", "pids", "systemd"}

// cgroupRoot is where the cgroup v1 hierarchies are mounted on the host.
const cgroupRoot = "/sys/fs/cgroup"

// Sysctls are the host-wide settings the kubelet writes at start
// (container_manager_linux.go, setupKernelTunables): each is shadowed in
// the machine's mount namespace by a file of the machine's.
var Sysctls = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

// Private are the machine's own directories, mounted over the host's:
// what a node writes outside its own directories (the kubelet's root and
// device plugins, containerd's default root, CNI state and
// configuration, /etc/kubernetes, the owner's kubelet drop-ins, logs)
// stays the machine's.
var Private = map[string]string{
	dropInMount:           "gridweave-etc",
	"/run":                "run",
	"/var/lib/kubelet":    "kubelet",
	"/var/lib/containerd": "containerd",
	"/var/lib/cni":        "cni",
	"/etc/cni/net.d":      "cni-conf",
	"/etc/kubernetes":     "kubernetes",
	"/var/log":            "log",
}

// mountpointRecord lists the host directories MakeMountpoint made (one
// file each, holding the path), on the disk, beside them, so that a
// reboot does not forget them: RemoveMountpoints removes them.
const mountpointRecord = "/var/lib/gridweave-realnode-mountpoints"

// Machine is a network namespace prepared to run a real node.
type Machine struct {
	Name string
	// Dir holds the machine's private directories (Private) and its
	// sysctl shadows.
	Dir string
	NS  *netnstest.Namespace
	// Cgroup is the machine's cgroup root in every hierarchy (gw-<name>).
	Cgroup   string
	holderMu sync.Mutex
	holder   *exec.Cmd
}

// Prepare makes ns the machine name (New) for a test. Teardown runs at
// the test's cleanup: every process of the machine's cgroups is killed
// and the cgroups removed.
func Prepare(t testing.TB, ns *netnstest.Namespace, name, dir string) *Machine {
	t.Helper()
	netnstest.RequireRoot(t)
	m, err := New(ns, name, dir)
	if m != nil {
		t.Cleanup(func() {
			if err := m.Teardown(); err != nil {
				t.Errorf("realnode: tearing %s down: %v", name, err)
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// New makes ns the machine name: its cgroup root, its private
// directories under dir and its sysctl shadows. Its caller tears it down
// (Teardown), also when New fails with a Machine.
func New(ns *netnstest.Namespace, name, dir string) (*Machine, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("realnode: a machine needs root (cgroups, mounts, namespaces)")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	for target := range Private {
		if abs == target || strings.HasPrefix(abs, target+"/") {
			return nil, fmt.Errorf("realnode: the machine's directory %s is under %s, which the machine mounts its own over", abs, target)
		}
	}
	m := &Machine{Name: name, Dir: abs, NS: ns, Cgroup: "gw-" + name}
	for target := range Private {
		if err := MakeMountpoint(target); err != nil {
			return nil, err
		}
	}
	for _, sub := range Private {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "run", "wireguard"), 0o700); err != nil {
		return nil, err
	}
	if err := m.writeSharedDiskDropIn(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "sysctl"), 0o755); err != nil {
		return nil, err
	}
	for _, s := range Sysctls {
		value, err := os.ReadFile(filepath.Join("/proc/sys", s))
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(m.sysctlFile(s), value, 0o644); err != nil {
			return nil, err
		}
	}
	for _, h := range Hierarchies {
		path := filepath.Join(cgroupRoot, h, m.Cgroup)
		if err := os.MkdirAll(path, 0o755); err != nil {
			return m, fmt.Errorf("realnode: the cgroup %s: %w", path, err)
		}
	}
	for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
		value, err := os.ReadFile(filepath.Join(cgroupRoot, "cpuset", f))
		if err != nil {
			return m, err
		}
		if err := os.WriteFile(filepath.Join(cgroupRoot, "cpuset", m.Cgroup, f), value, 0o644); err != nil {
			return m, err
		}
	}
	return m, nil
}

// SharedDiskDropIn is the kubelet drop-in (kubeletnode.DefaultDropInDir)
// every machine's owner writes: a machine shares the host's disk with
// every other test, so the kubelet's default hard eviction thresholds,
// shares of the whole disk (10 % free on the node's filesystem, 15 % on
// the images'), would taint a machine with disk pressure for what others
// wrote. It evicts on absolute free space instead (the thresholds it does
// not name keep the kubelet's defaults), and a pressure ends 30 s after
// what the kubelet measures is back above its threshold (the kubelet's
// default, 5 minutes, would keep a machine tainted that long for a
// moment when another test filled the shared disk or memory).
const SharedDiskDropIn = `{
  "apiVersion": "kubelet.config.k8s.io/v1beta1",
  "kind": "KubeletConfiguration",
  "evictionHard": {"nodefs.available": "1Gi", "imagefs.available": "1Gi"},
  "evictionPressureTransitionPeriod": "30s"
}
`

// SharedDiskDropInName is SharedDiskDropIn's file name in the drop-in
// directory.
const SharedDiskDropInName = "50-shared-disk.conf"

// KubeletDropInDir is the machine's kubelet drop-in directory
// (kubeletnode.DefaultDropInDir inside the machine) as the host sees it:
// the same files, for a kubelet the test starts from the host.
func (m *Machine) KubeletDropInDir() string {
	return filepath.Join(m.Dir, Private[dropInMount], dropInSubdir)
}

// dropInMount is the private directory kubeletnode.DefaultDropInDir is
// in; dropInSubdir its path there.
const dropInMount = "/etc/gridweave"

var dropInSubdir = func() string {
	rel, err := filepath.Rel(dropInMount, kubeletnode.DefaultDropInDir)
	if err != nil || strings.HasPrefix(rel, "..") {
		panic("realnode: kubeletnode.DefaultDropInDir " + kubeletnode.DefaultDropInDir + " is not under " + dropInMount)
	}
	return rel
}()

func (m *Machine) writeSharedDiskDropIn() error {
	if err := os.MkdirAll(m.KubeletDropInDir(), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(m.KubeletDropInDir(), SharedDiskDropInName), []byte(SharedDiskDropIn), 0o644)
}

// MakeCgroup makes the cgroup sub (a kubelet's cgroupRoot, say) below the
// machine's root in every hierarchy, cpuset's with the host's CPUs and
// memory nodes: what a node's supervisor does (kubeletnode.Supervise) for
// a kubelet a test runs itself.
func (m *Machine) MakeCgroup(t testing.TB, sub string) {
	t.Helper()
	for _, h := range Hierarchies {
		if err := os.MkdirAll(filepath.Join(cgroupRoot, h, m.Cgroup, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
		value, err := os.ReadFile(filepath.Join(cgroupRoot, "cpuset", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cgroupRoot, "cpuset", m.Cgroup, sub, f), value, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func (m *Machine) sysctlFile(s string) string {
	return filepath.Join(m.Dir, "sysctl", strings.ReplaceAll(s, "/", "."))
}

// Enter is a shell script that puts the shell running it, in the
// machine's network namespace and a new mount namespace of its own, into
// the machine, then runs "$@": its cgroup root and a cgroup namespace
// rooted there, its private directories, its sysctl shadows.
func (m *Machine) Enter() string {
	var b strings.Builder
	b.WriteString("set -e\n")
	// ip netns exec remounted /sys: the host's hierarchies, to move in.
	fmt.Fprintf(&b, "mount -t tmpfs -o mode=755 cgroup %s\n", cgroupRoot)
	for _, h := range Hierarchies {
		fmt.Fprintf(&b, "mkdir -p %[1]s/%[2]s && mount -t cgroup -o %[3]s cgroup %[1]s/%[2]s && echo $$ > %[1]s/%[2]s/%[4]s/cgroup.procs\n", cgroupRoot, h, option(h), m.Cgroup)
	}
	var stage2 strings.Builder
	stage2.WriteString("set -e\n")
	fmt.Fprintf(&stage2, "umount -R %[1]s && mount -t tmpfs -o mode=755 cgroup %[1]s\n", cgroupRoot)
	for _, h := range Hierarchies {
		fmt.Fprintf(&stage2, "mkdir -p %[1]s/%[2]s && mount -t cgroup -o %[3]s cgroup %[1]s/%[2]s\n", cgroupRoot, h, option(h))
	}
	for target, sub := range Private {
		fmt.Fprintf(&stage2, "mkdir -p %[1]s && mount --bind %[2]s %[1]s\n", target, filepath.Join(m.Dir, sub))
	}
	for _, s := range Sysctls {
		fmt.Fprintf(&stage2, "mount --bind %s /proc/sys/%s\n", m.sysctlFile(s), s)
	}
	// The kubelet's volumes reach containerd's containers.
	stage2.WriteString("mount --make-rshared /\nexec \"$@\"\n")
	fmt.Fprintf(&b, "exec unshare --cgroup sh -c %s realnode \"$@\"\n", singleQuoted(stage2.String()))
	return b.String()
}

// singleQuoted is s as one word of a POSIX shell.
func singleQuoted(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}

func option(h string) string {
	if h == "systemd" {
		return "none,name=systemd"
	}
	return h
}

// Command is argv run as the machine: in its network namespace, a new
// mount namespace and the machine (Enter). Like every harness process it
// carries the test control plane's owner mark, so make test's leftover
// check finds it.
func (m *Machine) Command(argv ...string) *exec.Cmd {
	args := append([]string{"unshare", "--mount", "--propagation", "private", "sh", "-c", m.Enter(), "realnode"}, argv...)
	cmd := m.NS.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), m.OwnerEnv())
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// Pids lists every process of the machine's cgroups.
func (m *Machine) Pids() ([]int, error) {
	var pids []int
	err := filepath.WalkDir(filepath.Join(cgroupRoot, "pids", m.Cgroup), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		if d.IsDir() || d.Name() != "cgroup.procs" {
			return nil
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil // removed meanwhile
		}
		for _, f := range strings.Fields(string(raw)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids, err
}

// Teardown kills every process of the machine's cgroups, until none is
// left, and removes the cgroups, deepest first.
func (m *Machine) Teardown() error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		pids, err := m.Pids()
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v of %s do not die", pids, m.Cgroup)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var errs []string
	for _, h := range Hierarchies {
		root := filepath.Join(cgroupRoot, h, m.Cgroup)
		var dirs []string
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- { // deepest first
			if err := removeCgroup(dirs[i]); err != nil {
				errs = append(errs, err.Error())
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// removeCgroup removes an empty cgroup, trying again while the kernel
// still counts a process that just died.
func removeCgroup(dir string) error {
	var err error
	for range 50 {
		if err = syscall.Rmdir(dir); err == nil || os.IsNotExist(err) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("remove %s: %w", dir, err)
}

// Leftovers lists the machines' cgroups (gw-*) still in the host's
// hierarchies.
func Leftovers() ([]string, error) {
	var left []string
	for _, h := range Hierarchies {
		matches, err := filepath.Glob(filepath.Join(cgroupRoot, h, "gw-*"))
		if err != nil {
			return nil, err
		}
		left = append(left, matches...)
	}
	return left, nil
}

// LeftoversOf is Leftovers of the machines whose names begin with
// prefix: a test's own, while other packages' machines may run beside it.
func LeftoversOf(prefix string) ([]string, error) {
	all, err := Leftovers()
	return slices.DeleteFunc(all, func(c string) bool { return !strings.HasPrefix(filepath.Base(c), "gw-"+prefix) }), err
}

// Holder starts a process that holds the machine's namespaces (Enter's)
// open (StartHolder), failing the test when it cannot. It stops at
// Teardown.
func (m *Machine) Holder(t testing.TB) int {
	t.Helper()
	pid, err := m.StartHolder()
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// StartHolder starts a process that holds the machine's namespaces
// (Enter's) open, once, and returns its pid; Exec starts processes in
// them, so that they share one mount namespace (containerd sees the
// kubelet's volume mounts). The holder outlives its starter and stops at
// Teardown.
func (m *Machine) StartHolder() (int, error) {
	m.holderMu.Lock()
	defer m.holderMu.Unlock()
	if m.holder != nil {
		return m.holder.Process.Pid, nil
	}
	cmd := m.Command("sleep", "infinity")
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	m.holder = cmd
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// The holder is in the machine once its mount namespace is not the
	// host's and its cgroup namespace is rooted at the machine's.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if child := sleeping(cmd.Process.Pid); child != 0 {
			return child, nil
		}
		select {
		case err := <-exited:
			return 0, fmt.Errorf("realnode: the machine's holder exited (%v): %s", err, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("realnode: the machine's holder did not start: %s", stderr.String())
		}
	}
}

// sleeping is the pid of the `sleep infinity` the holder's shells exec
// into: the holder itself once it has exec'd (ip netns exec, unshare and
// the shells all exec).
func sleeping(pid int) int {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !strings.HasPrefix(string(raw), "sleep\x00infinity") {
		return 0
	}
	return pid
}

// Process is a process Run started.
type Process struct {
	Cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Wait waits for the process to exit and returns how it did.
func (p *Process) Wait() error {
	<-p.done
	return p.err
}

// Exec is argv, not started, to run in the machine (ExecCommand),
// failing the test when the machine's holder cannot start.
func (m *Machine) Exec(t testing.TB, argv ...string) *exec.Cmd {
	t.Helper()
	cmd, err := m.ExecCommand(argv...)
	if err != nil {
		t.Fatal(err)
	}
	return cmd
}

// ExecCommand is argv, not started, to run in the machine: in the
// holder's namespaces (network, mount, cgroup) and the machine's cgroups,
// so that every process of the machine shares one mount namespace, as on
// a machine. Its environment is the caller's unless the caller sets one
// (keep OwnerEnv in it: make test's leftover check finds the process by
// it).
func (m *Machine) ExecCommand(argv ...string) (*exec.Cmd, error) {
	holder, err := m.StartHolder()
	if err != nil {
		return nil, err
	}
	var enter strings.Builder
	for _, h := range Hierarchies {
		fmt.Fprintf(&enter, "echo $$ > %s/%s/%s/cgroup.procs\n", cgroupRoot, h, m.Cgroup)
	}
	fmt.Fprintf(&enter, "exec nsenter -t %d -m -n -C -- \"$@\"\n", holder)
	cmd := exec.Command("sh", append([]string{"-c", enter.String(), "realnode"}, argv...)...)
	cmd.Env = append(os.Environ(), m.OwnerEnv())
	return cmd, nil
}

// OwnerEnv is the mark of the machine's processes (testcluster.OwnerEnv).
func (m *Machine) OwnerEnv() string { return testcluster.OwnerEnv + "=realnode-" + m.Name }

// Run starts argv in the machine (Exec), its output to log.
func (m *Machine) Run(t testing.TB, logPath string, argv ...string) *Process {
	t.Helper()
	cmd := m.Exec(t, argv...)
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &Process{Cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		log.Close()
		close(p.done)
	}()
	return p
}

// lockedBuffer is a bytes.Buffer safe to write from a process's copier
// while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Remove tears the machine name down (Teardown) from its name alone: what
// a process that did not make the machine (a playground's cleanup) does.
func Remove(name string) error {
	return (&Machine{Name: name, Cgroup: "gw-" + name}).Teardown()
}

// MakeMountpoint makes the host directory dir, a mountpoint of a
// machine's own directory (those of Private, or a harness's), when it is
// missing, recording each directory it makes in mountpointRecord for
// RemoveMountpoints. Only what it made itself is recorded: a path that is
// there in any form (a symlink, dangling or not, included) is left alone.
func MakeMountpoint(dir string) error {
	var missing []string
	for d := dir; d != "/"; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil {
			break
		}
		missing = append(missing, d)
	}
	for i := len(missing) - 1; i >= 0; i-- { // shallowest first
		if err := os.Mkdir(missing[i], 0o755); err != nil {
			if os.IsExist(err) {
				continue // made meanwhile by another: not ours
			}
			return err
		}
		if err := os.MkdirAll(mountpointRecord, 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(recordOf(missing[i]), []byte(missing[i]), 0o600); err != nil {
			return err
		}
	}
	return nil
}

func recordOf(dir string) string {
	return filepath.Join(mountpointRecord, strings.ReplaceAll(strings.Trim(dir, "/"), "/", "_"))
}

// RemoveMountpoints removes the host directories MakeMountpoint made,
// deepest first, each only when it is still an empty directory and no
// process has a mount on it, and only when no machine is left
// (Leftovers); it returns those it removed. Run it when no test that
// makes machines runs: make test's leftover check does, after the tests,
// and the playground when it stops, so the host keeps only what it had.
func RemoveMountpoints() ([]string, error) {
	if left, err := Leftovers(); err != nil || len(left) > 0 {
		return nil, err
	}
	inUse := mountedOn()
	records, err := os.ReadDir(mountpointRecord)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var dirs []string
	for _, r := range records {
		raw, err := os.ReadFile(filepath.Join(mountpointRecord, r.Name()))
		if err != nil {
			return nil, err
		}
		dirs = append(dirs, string(raw))
	}
	// Deepest first: a parent goes after its children.
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	var removed []string
	for _, d := range dirs {
		if inUse[d] {
			continue
		}
		// rmdir: never a file or a symlink, never a directory with
		// anything in it.
		if err := syscall.Rmdir(d); err == nil {
			removed = append(removed, d)
		} else if !os.IsNotExist(err) {
			continue // not empty: something of the host's is there now
		}
		_ = os.Remove(recordOf(d))
	}
	_ = syscall.Rmdir(mountpointRecord) // when every record went
	return removed, nil
}

// mountedOn is the set of mount points of every process's mount
// namespace (field 5 of /proc/PID/mountinfo).
func mountedOn() map[string]bool {
	points := map[string]bool{}
	procs, _ := filepath.Glob("/proc/[0-9]*/mountinfo")
	seen := map[string]bool{} // mount namespaces already read
	for _, p := range procs {
		ns, err := os.Readlink(filepath.Join(filepath.Dir(p), "ns", "mnt"))
		if err != nil || seen[ns] {
			continue
		}
		seen[ns] = true
		raw, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(raw), "\n") {
			if f := strings.Fields(line); len(f) > 4 {
				points[f[4]] = true
			}
		}
	}
	return points
}
