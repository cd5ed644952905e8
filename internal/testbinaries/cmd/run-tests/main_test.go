package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"gridweave.dev/internal/testbinaries"
)

// moduleOf writes a module of packages p0…p(n-1), each with one passing
// test, and the test files given (path → source), and makes it the
// working directory.
func moduleOf(t *testing.T, n int, files map[string]string) {
	t.Helper()
	dir := t.TempDir()
	all := map[string]string{"go.mod": "module example.com/m\n\ngo 1.24\n"}
	for i := range n {
		all[fmt.Sprintf("p%d/p_test.go", i)] = fmt.Sprintf("package p%d\n\nimport \"testing\"\n\nfunc TestP(t *testing.T) {}\n", i)
	}
	for path, src := range files {
		all[path] = src
	}
	for path, src := range all {
		path = filepath.Join(dir, path)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
}

func runTests(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	stderr, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	err = run(context.Background(), args, &out, stderr)
	return out.String(), err
}

// Every package runs, across the link batches, and a failing one fails
// the run; the next run starts the slowest first.
func TestRunsEveryPackage(t *testing.T) {
	moduleOf(t, 6, map[string]string{
		"slow/s_test.go": "package slow\n\nimport (\n\t\"testing\"\n\t\"time\"\n)\n\nfunc TestS(t *testing.T) { time.Sleep(300 * time.Millisecond) }\n",
		"bad/b_test.go":  "package bad\n\nimport \"testing\"\n\nfunc TestB(t *testing.T) { t.Error(\"bad fails\") }\n",
	})
	bin := t.TempDir()
	out, err := runTests(t, "-bin", bin, "-p", "2", "./...")
	if err == nil || !strings.Contains(out, "bad fails") || !strings.Contains(out, "FAIL\texample.com/m/bad\t") {
		t.Fatalf("a failing package: %v\n%s", err, out)
	}
	for _, pkg := range []string{"p0", "p1", "p2", "p3", "p4", "p5", "slow"} {
		if !strings.Contains(out, "ok  \texample.com/m/"+pkg+"\t") {
			t.Errorf("%s did not pass:\n%s", pkg, out)
		}
	}
	if got := loadTimings(bin, timingsFile(false, false)); len(got) != 8 || got["example.com/m/slow"] < 0.3 {
		t.Errorf("the times kept: %v", got)
	}
	// The slowest last time runs first: its line comes first with one
	// package at a time.
	out, _ = runTests(t, "-bin", bin, "-p", "1", "./...")
	if !strings.HasPrefix(out, "ok  \texample.com/m/slow\t") {
		t.Errorf("the slowest package did not start first:\n%s", out)
	}
}

// A test that does not build fails the run, and no package of its link
// batch or after runs on a binary that may be stale.
func TestABuildFailureRunsNothingStale(t *testing.T) {
	moduleOf(t, 6, nil)
	bin := t.TempDir()
	if out, err := runTests(t, "-bin", bin, "./..."); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// Break p5's test, wherever p5 falls among the link batches: its old
	// binary, which passes, must not run.
	if err := os.WriteFile("p5/p_test.go", []byte("package p5\n\nfunc broken( {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runTests(t, "-bin", bin, "./...")
	if err == nil || !strings.Contains(out, "FAIL\t(build") {
		t.Fatalf("a test that does not build: %v\n%s", err, out)
	}
	if strings.Contains(out, "example.com/m/p5") {
		t.Errorf("p5's stale binary ran:\n%s", out)
	}
}

// A package without tests that does not compile fails the run, as it
// fails go test: no test binary would have built it.
func TestAPackageWithoutTestsIsCompiled(t *testing.T) {
	moduleOf(t, 1, map[string]string{"cmd/tool/main.go": "package main\n\nfunc main() { var n int = \"s\"; _ = n }\n"})
	_, err := runTests(t, "-bin", t.TempDir(), "./...")
	if err == nil || !strings.Contains(err.Error(), "example.com/m/cmd/tool") {
		t.Errorf("a command that does not compile: %v", err)
	}
}

// A new checkout starts with the times of the last run in another (CI's
// fresh clone starts its slowest package first), and the binaries of a
// checkout that is gone are removed.
func TestCheckoutsShareTimesAndVanish(t *testing.T) {
	// The go command's build cache stays where it is: it too lives in
	// the user cache directory, which the test moves.
	goCache, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOCACHE", strings.TrimSpace(string(goCache)))
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	slow := map[string]string{"slow/s_test.go": "package slow\n\nimport (\n\t\"testing\"\n\t\"time\"\n)\n\nfunc TestS(t *testing.T) { time.Sleep(300 * time.Millisecond) }\n"}
	moduleOf(t, 3, slow)
	first, _ := os.Getwd()
	if out, err := runTests(t, "-p", "1", "./..."); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	moduleOf(t, 3, slow)
	out, err := runTests(t, "-p", "1", "./...")
	if err != nil || !strings.HasPrefix(out, "ok  \texample.com/m/slow\t") {
		t.Errorf("a new checkout did not start the slowest package first: %v\n%s", err, out)
	}
	root, err := cacheRoot()
	if err != nil {
		t.Fatal(err)
	}
	checkouts := func() map[string]bool {
		t.Helper()
		entries, err := os.ReadDir(root)
		if err != nil {
			t.Fatal(err)
		}
		kept := map[string]bool{}
		for _, e := range entries {
			if b, err := os.ReadFile(filepath.Join(root, e.Name(), checkoutFile)); err == nil {
				kept[string(b)] = true
			}
		}
		return kept
	}
	second, _ := os.Getwd()
	if got := checkouts(); len(got) != 2 || !got[first] || !got[second] {
		t.Fatalf("the checkouts' binaries: %v, want %s and %s", got, first, second)
	}
	if err := os.RemoveAll(first); err != nil {
		t.Fatal(err)
	}
	if out, err := runTests(t, "-p", "1", "./..."); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if got := checkouts(); len(got) != 1 || !got[second] {
		t.Errorf("after %s was removed, the binaries kept are %v", first, got)
	}

	// Left alone: a directory that names no checkout, and one whose
	// checkout is out of sight while a run holds its binaries.
	unnamed, held := filepath.Join(root, "unnamed"), filepath.Join(root, "held")
	for _, dir := range []string{unnamed, filepath.Join(held, "plain")} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(held, checkoutFile), []byte(first), 0o644); err != nil {
		t.Fatal(err)
	}
	unlock, err := testbinaries.Lock(context.Background(), filepath.Join(held, "plain"))
	if err != nil {
		t.Fatal(err)
	}
	if out, err := runTests(t, "-p", "1", "./..."); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, dir := range []string{unnamed, held} {
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("%s was removed: %v", dir, err)
		}
	}
	unlock()
	if out, err := runTests(t, "-p", "1", "./..."); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if _, err := os.Stat(held); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("once no run held them, the binaries of a checkout that is gone were kept: %v", err)
	}
}

// The processor time printed for a package counts the processes its
// tests waited for: here a child that spins until it has used 1.2
// seconds of processor time.
func TestCPUCountsTheProcessesATestWaitsFor(t *testing.T) {
	moduleOf(t, 0, map[string]string{"busy/b_test.go": `package busy

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func TestBusy(t *testing.T) {
	if os.Getenv("SPIN") == "1" {
		var ru syscall.Rusage
		for ru.Utime.Nano()+ru.Stime.Nano() < int64(1200*time.Millisecond) {
			if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestBusy$")
	cmd.Env = append(os.Environ(), "SPIN=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
}
`})
	out, err := runTests(t, "-bin", t.TempDir(), "./...")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	counted := regexp.MustCompile(`(?m)^  example.com/m/busy +([0-9.]+)$`).FindStringSubmatch(out)
	if counted == nil {
		t.Fatalf("no processor time for the package:\n%s", out)
	}
	if n, _ := strconv.ParseFloat(counted[1], 64); n < 1.2 {
		t.Errorf("the child used 1.2 s of processor time, the package is counted %.1f s:\n%s", n, out)
	}
}
