package raytest

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"testing"
	"time"
)

// venvBudget bounds the first install (several GB from PyPI).
const venvBudget = 30 * time.Minute

var venvOnce struct {
	sync.Mutex
	venv *Venv
	err  error
}

// RequireVenv returns the cached environment, creating it on first use.
// In -short mode the test is skipped: real Ray runs in `make test`.
func RequireVenv(tb testing.TB) *Venv {
	tb.Helper()
	if testing.Short() {
		tb.Skip("raytest: real Ray not started in -short mode; run make test")
	}
	venvOnce.Lock()
	defer venvOnce.Unlock()
	if venvOnce.venv == nil && venvOnce.err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), venvBudget)
		defer cancel()
		root, err := DefaultCacheRoot()
		if err == nil {
			var progress io.Writer
			if testing.Verbose() {
				progress = os.Stderr
			}
			venvOnce.venv, err = EnsureVenv(ctx, root, progress)
		}
		venvOnce.err = err
	}
	if venvOnce.err != nil {
		tb.Fatalf("raytest: %v", venvOnce.err)
	}
	return venvOnce.venv
}

var shared struct {
	sync.Mutex
	enabled bool
	ns      *Namespace
	head    *Node
	err     error
}

// SharedHeadCPUs are the logical CPUs of the package's shared head.
const SharedHeadCPUs = 4

// SharedNamespace is the namespace of the shared head (nil before Shared).
func SharedNamespace() *Namespace {
	shared.Lock()
	defer shared.Unlock()
	return shared.ns
}

// Shared returns the package's one Ray head (dashboard, SharedHeadCPUs
// logical CPUs, no workers) in a network namespace of its own, reachable
// from the host at its IP, starting it on first use;
// RunMain stops it after the last test. Tests that share it use their own
// job ids and Serve application names.
func Shared(tb testing.TB) *Node {
	tb.Helper()
	venv := RequireVenv(tb)
	shared.Lock()
	defer shared.Unlock()
	if !shared.enabled {
		tb.Fatal("raytest.Shared needs TestMain to call raytest.RunMain")
	}
	if shared.head == nil && shared.err == nil {
		shared.ns, shared.err = NewNamespace()
		if shared.err == nil {
			shared.head, shared.err = StartNode(context.Background(), NodeOptions{Venv: venv, NetNS: shared.ns.Name, IP: shared.ns.NSIP, NumCPUs: SharedHeadCPUs, ObjectStoreBytes: 300 << 20}, "")
		}
	}
	if shared.err != nil {
		tb.Fatalf("raytest: %v", shared.err)
	}
	return shared.head
}

// RunMain runs the package's tests and then stops the shared head, if
// Shared started one; when a test failed, the end of the head's logs is
// printed. Use it from TestMain (with testcluster.RunMain, wrap one in the
// other).
func RunMain(m interface{ Run() int }) int {
	shared.Lock()
	shared.enabled = true
	shared.Unlock()
	code := m.Run()
	shared.Lock()
	defer shared.Unlock()
	if shared.head != nil {
		if code != 0 {
			fmt.Fprintf(os.Stderr, "raytest: shared head logs (tail):\n%s", shared.head.Logs(16<<10))
		}
		shared.head.Stop()
		shared.head = nil
	}
	if shared.ns != nil {
		shared.ns.Close()
		shared.ns = nil
	}
	return code
}

// StartNodeT starts a node for one test and stops it when the test ends.
func StartNodeT(tb testing.TB, opts NodeOptions, headDashboard string) *Node {
	tb.Helper()
	if opts.Venv == nil {
		opts.Venv = RequireVenv(tb)
	}
	n, err := StartNode(context.Background(), opts, headDashboard)
	if err != nil {
		tb.Fatalf("raytest: %v", err)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("ray node %s logs:\n%s", n.IP, n.Logs(8<<10))
		}
		n.Stop()
	})
	return n
}

// RunFunc adapts a function to RunMain, to nest it with another package
// helper's RunMain:
//
//	os.Exit(raytest.RunMain(raytest.RunFunc(func() int { return testcluster.RunMain(m) })))
type RunFunc func() int

// Run calls f.
func (f RunFunc) Run() int { return f() }
