package testcluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// startBudget bounds a whole start, including a first build of the binaries
// (several minutes on two cores).
const startBudget = 30 * time.Minute

// Start starts a control plane for one test and stops it in tb.Cleanup, even
// when the test fails or panics. Its state and logs live in tb.TempDir();
// when the test has failed, the end of every component's log is printed.
// In -short mode (make test-unit) the test is skipped: real-component tests
// run in make test.
func Start(tb testing.TB, opts *Options) *Cluster {
	tb.Helper()
	if testing.Short() {
		tb.Skip("testcluster: real control plane not started in -short mode; run make test")
	}
	o := Options{}
	if opts != nil {
		o = *opts
	}
	if o.Dir == "" {
		o.Dir = tb.TempDir()
	}
	if o.Progress == nil && testing.Verbose() {
		o.Progress = os.Stderr
	}
	ctx, cancel := context.WithTimeout(context.Background(), startBudget)
	defer cancel()
	c, err := New(ctx, &o)
	if err != nil {
		tb.Fatalf("testcluster: %v", err)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("testcluster: component logs (tail):\n%s", c.Logs(16<<10))
		}
		c.Stop()
	})
	return c
}

// shared is the one control plane of a test binary that uses RunMain.
var shared struct {
	sync.Mutex
	enabled bool
	options Options
	cluster *Cluster
	err     error
}

// RunMain runs the package's tests and then stops the shared control plane,
// if Shared started one. Use it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(testcluster.RunMain(m)) }
//
// When any test failed, the end of every component's log is printed. It
// returns m.Run's exit code, or 1 if a harness process outlived the cluster.
func RunMain(m *testing.M) int { return RunMainWith(m, Options{}) }

// RunMainWith is RunMain whose shared control plane starts with opts (a
// pod range its controller-manager allocates from, say).
func RunMainWith(m *testing.M, opts Options) int {
	shared.Lock()
	shared.enabled = true
	shared.options = opts
	shared.Unlock()

	code := m.Run()

	shared.Lock()
	defer shared.Unlock()
	c := shared.cluster
	if c == nil {
		return code
	}
	if code != 0 {
		fmt.Fprintf(os.Stderr, "testcluster: component logs (tail):\n%s", c.Logs(16<<10))
	}
	c.Stop()
	shared.cluster = nil
	if left, err := Leftovers(c.ID); err != nil || len(left) > 0 {
		fmt.Fprintf(os.Stderr, "testcluster: processes left running after Stop: %v %v\n", left, err)
		return 1
	}
	return code
}

// Shared returns the package's one control plane, starting it on first use;
// RunMain stops it after the last test. Tests that share it must not depend
// on each other's objects: each uses its own namespace or names.
func Shared(tb testing.TB) *Cluster {
	tb.Helper()
	if testing.Short() {
		tb.Skip("testcluster: real control plane not started in -short mode; run make test")
	}
	shared.Lock()
	defer shared.Unlock()
	if !shared.enabled {
		tb.Fatal("testcluster.Shared needs TestMain to call testcluster.RunMain")
	}
	if shared.cluster == nil && shared.err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), startBudget)
		defer cancel()
		var progress io.Writer
		if testing.Verbose() {
			progress = os.Stderr
		}
		opts := shared.options
		opts.Progress = progress
		shared.cluster, shared.err = New(ctx, &opts)
	}
	if shared.err != nil {
		tb.Fatalf("testcluster: %v", shared.err)
	}
	return shared.cluster
}

// Leftover is a process started by a cluster that is still running.
type Leftover struct {
	PID     int
	Cmdline string
}

// Leftovers lists the running processes whose environment carries
// GRIDWEAVE_TESTCLUSTER_OWNER=id, or, with id empty, any value: the
// processes that a cluster (or, with id empty, any cluster) started and that
// are still alive, wherever they were re-parented.
func Leftovers(id string) ([]Leftover, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	want := ownerEnv + "=" + id
	var left []Leftover
	for _, e := range entries {
		pid := 0
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil || pid <= 0 {
			continue
		}
		environ, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue // gone, or a kernel thread
		}
		found := false
		for _, kv := range strings.Split(string(environ), "\x00") {
			if (id != "" && kv == want) || (id == "" && strings.HasPrefix(kv, ownerEnv+"=")) {
				found = true
				break
			}
		}
		if !found || isZombie(e.Name()) {
			continue
		}
		cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		left = append(left, Leftover{PID: pid, Cmdline: strings.ReplaceAll(strings.TrimRight(string(cmdline), "\x00"), "\x00", " ")})
	}
	return left, nil
}

func isZombie(pid string) bool {
	stat, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return true
	}
	// The state follows the parenthesised command name.
	i := strings.LastIndexByte(string(stat), ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' || stat[i+2] == 'X'
}
