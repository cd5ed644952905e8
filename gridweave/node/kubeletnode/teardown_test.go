package kubeletnode

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"gridweave.dev/internal/netnstest"
)

// TestKillShimsSparesOtherMountNamespaces: two processes that look like
// shims of a containerd at the same socket path, one in this process's
// mount namespace and one in a mount namespace of its own (as another
// node's on the same host would be): killShims kills only the first.
func TestKillShimsSparesOtherMountNamespaces(t *testing.T) {
	netnstest.RequireRoot(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The shim is this test binary under a shim's name, running
	// TestFakeShimProcess, its command line naming the socket.
	dir := t.TempDir()
	name := filepath.Join(dir, "containerd-shim-runc-v2")
	if err := os.Symlink(self, name); err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(dir, "containerd.sock")
	shim := func(prefix ...string) (*exec.Cmd, chan error) {
		t.Helper()
		argv := append(prefix, name, "-test.run=^TestFakeShimProcess$", "--", "-address", socket)
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), "GRIDWEAVE_FAKE_SHIM=1")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		waited := make(chan struct{})
		go func() { done <- cmd.Wait(); close(waited) }()
		t.Cleanup(func() { _ = cmd.Process.Kill(); <-waited })
		return cmd, done
	}
	ours, oursDone := shim()
	theirs, theirsDone := shim("unshare", "--mount", "--propagation", "private")
	// unshare execs the shim: both processes are the shims once their
	// command lines name the socket.
	for deadline := time.Now().Add(10 * time.Second); !namesSocket(ours.Process.Pid, socket) || !namesSocket(theirs.Process.Pid, socket); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the fake shims never showed their command lines")
		}
	}
	killShims(socket)
	select {
	case <-oursDone:
	case <-time.After(10 * time.Second):
		t.Fatal("the shim of this mount namespace was not killed")
	}
	select {
	case err := <-theirsDone:
		t.Fatalf("the shim of another mount namespace was killed: %v", err)
	case <-time.After(time.Second):
	}
}

// TestFakeShimProcess is the fake shim of
// TestKillShimsSparesOtherMountNamespaces: it waits to be killed.
func TestFakeShimProcess(t *testing.T) {
	if os.Getenv("GRIDWEAVE_FAKE_SHIM") == "" {
		t.Skip("the child process of TestKillShimsSparesOtherMountNamespaces")
	}
	time.Sleep(time.Minute)
}

func namesSocket(pid int, socket string) bool {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	return err == nil && strings.Contains(string(raw), "\x00-address\x00"+socket)
}
