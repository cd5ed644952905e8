package testcluster

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"gridweave.dev/internal/randhex"
)

func TestToolsModulePinsTheDeclaredVersions(t *testing.T) {
	dir, err := toolsModuleDir()
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"k8s.io/kubernetes " + KubernetesVersion,
		"go.etcd.io/etcd/server/v3 " + EtcdVersion,
		"k8s.io/client-go => k8s.io/client-go v0" + strings.TrimPrefix(KubernetesVersion, "v1"),
	} {
		if !strings.Contains(string(gomod), want) {
			t.Errorf("tools/go.mod lacks %q", want)
		}
	}
}

func TestCacheKeyNamesVersionsAndIsStable(t *testing.T) {
	dir, err := toolsModuleDir()
	if err != nil {
		t.Fatal(err)
	}
	a, err := cacheKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := cacheKey(dir)
	if a != b {
		t.Fatalf("cache key not stable: %q vs %q", a, b)
	}
	if !strings.Contains(a, KubernetesVersion) || !strings.Contains(a, KubeRayVersion) {
		t.Fatalf("cache key %q does not name the versions", a)
	}
}

func TestFreePortsAreDistinct(t *testing.T) {
	ports, err := FreePorts(8)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p <= 0 || seen[p] {
			t.Fatalf("bad or repeated port in %v", ports)
		}
		seen[p] = true
	}
}

// TestStopEndsChildAndLeftoversFindsOnlyOwnChildren runs plain sleep
// processes through the spawner: Leftovers sees them by owner id while they
// run, and nothing once stop has returned.
func TestStopEndsChildAndLeftoversFindsOnlyOwnChildren(t *testing.T) {
	s := newSpawner()
	defer s.close()
	id := randhex.String(8)
	env := append(os.Environ(), ownerEnv+"="+id)
	dir := t.TempDir()

	stubborn, err := s.startProcess("stubborn", dir, "/bin/sh", []string{"-c", "trap '' TERM; sleep 60 & wait"}, env)
	if err != nil {
		t.Fatal(err)
	}
	polite, err := s.startProcess("polite", dir, "/bin/sleep", []string{"60"}, env)
	if err != nil {
		t.Fatal(err)
	}
	// A child shows its own environment only once it has exec'd.
	var left []Leftover
	for deadline := time.Now().Add(10 * time.Second); ; {
		var err error
		if left, err = Leftovers(id); err != nil {
			t.Fatal(err)
		}
		if len(left) >= 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(left) < 2 {
		t.Fatalf("Leftovers(%s) = %v while two children run", id, left)
	}
	if other, _ := Leftovers(randhex.String(8)); len(other) != 0 {
		t.Fatalf("Leftovers of an unknown id = %v, want none", other)
	}

	polite.stop(5 * time.Second)
	stubborn.stop(200 * time.Millisecond) // ignores SIGTERM: killed after the grace
	for _, p := range []*process{polite, stubborn} {
		if p.running() {
			t.Fatalf("%s still running after stop", p.name)
		}
		if err := syscall.Kill(p.PID(), 0); !errors.Is(err, syscall.ESRCH) {
			t.Fatalf("%s pid %d still exists: %v", p.name, p.PID(), err)
		}
	}
	// The shell's own sleep child was not ours to signal; it is left, and
	// Leftovers must say so. Kill it by PID to keep the machine clean.
	left, _ = Leftovers(id)
	for _, l := range left {
		if !strings.Contains(l.Cmdline, "sleep 60") {
			t.Errorf("unexpected leftover %v", l)
		}
		_ = syscall.Kill(l.PID, syscall.SIGKILL)
	}
}

func TestProcessLogIsKeptAndTailed(t *testing.T) {
	s := newSpawner()
	defer s.close()
	p, err := s.startProcess("echo", t.TempDir(), "/bin/sh", []string{"-c", "echo hello-from-child; exit 3"}, os.Environ())
	if err != nil {
		t.Fatal(err)
	}
	<-p.exited
	if got := p.tail(1024); !strings.Contains(got, "hello-from-child") {
		t.Fatalf("log tail %q lacks the child's output", got)
	}
	if err := p.exitError(); !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("exitError = %v, want the exit status", err)
	}
}
