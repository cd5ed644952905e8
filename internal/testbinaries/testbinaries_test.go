package testbinaries_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gridweave.dev/internal/testbinaries"
)

// module writes a module of packages (path → a test file's source) into
// a temporary directory and returns it.
func module(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	write(t, filepath.Join(dir, "go.mod"), "module example.com/m\n\ngo 1.24\n")
	for path, src := range files {
		write(t, filepath.Join(dir, path), src)
	}
	return dir
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

const (
	// passing checks that it runs in its package's directory, with the
	// go command that built it first on PATH, as go test runs it.
	passing = `package a

import (
	"os"
	"os/exec"
	"testing"
)

func TestHere(t *testing.T) {
	if b, err := os.ReadFile("testdata/here"); err != nil || string(b) != "a" {
		t.Fatalf("testdata/here: %q, %v", b, err)
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatal(err)
	}
	if testing.Short() {
		t.Log("short")
	}
}
`
	failing = `package b

import "testing"

func TestB(t *testing.T) { t.Fatal("b fails") }
`
	mended = `package b

import "testing"

func TestB(t *testing.T) {}
`
)

func TestLinkAndRun(t *testing.T) {
	ctx := context.Background()
	dir := module(t, map[string]string{
		"a/a_test.go":     passing,
		"a/testdata/here": "a",
		"b/b_test.go":     failing,
		"c/c.go":          "package c\n", // no tests: not listed
	})
	pkgs, err := testbinaries.List(ctx, "go", dir, []string{"./..."})
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) != 2 || pkgs[0].ImportPath != "example.com/m/a" || pkgs[1].ImportPath != "example.com/m/b" || pkgs[0].Dir != filepath.Join(dir, "a") {
		t.Fatalf("listed %+v: want a and b, with their directories", pkgs)
	}
	binDir := t.TempDir()
	if err := testbinaries.Link(ctx, "go", dir, binDir, pkgs, testbinaries.LinkOptions{}); err != nil {
		t.Fatal(err)
	}
	goBin, err := testbinaries.GoBin(ctx, "go")
	if err != nil {
		t.Fatal(err)
	}
	opts := testbinaries.RunOptions{GoBin: goBin, Timeout: time.Minute, Args: []string{"-test.short", "-test.v"}}

	a := testbinaries.Run(ctx, binDir, pkgs[0], opts)
	if !a.Passed || !strings.HasPrefix(a.Line(), "ok  \texample.com/m/a\t") || !strings.Contains(string(a.Output), "short") {
		t.Errorf("a: %s\n%s", a.Line(), a.Output)
	}
	b := testbinaries.Run(ctx, binDir, pkgs[1], opts)
	if b.Passed || !strings.HasPrefix(b.Line(), "FAIL\texample.com/m/b\t") || !strings.Contains(string(b.Output), "b fails") {
		t.Errorf("b: %s\n%s", b.Line(), b.Output)
	}

	// b mended: the next link gives it a new binary, never the old one.
	write(t, filepath.Join(dir, "b", "b_test.go"), mended)
	if err := testbinaries.Link(ctx, "go", dir, binDir, pkgs, testbinaries.LinkOptions{}); err != nil {
		t.Fatal(err)
	}
	if b := testbinaries.Run(ctx, binDir, pkgs[1], opts); !b.Passed {
		t.Errorf("b mended still fails: the old binary ran\n%s", b.Output)
	}

	// b broken: the link fails.
	write(t, filepath.Join(dir, "b", "b_test.go"), "package b\n\nfunc broken( {}\n")
	if err := testbinaries.Link(ctx, "go", dir, binDir, pkgs, testbinaries.LinkOptions{}); err == nil {
		t.Error("a package that does not compile linked")
	}
}

// A binary that outlives its timeout fails and says so.
func TestRunStopsAtTheTimeout(t *testing.T) {
	ctx := context.Background()
	dir := module(t, map[string]string{"s/s_test.go": `package s

import (
	"testing"
	"time"
)

func TestSleeps(t *testing.T) { time.Sleep(time.Minute) }
`})
	pkgs, err := testbinaries.List(ctx, "go", dir, []string{"./..."})
	if err != nil {
		t.Fatal(err)
	}
	binDir := t.TempDir()
	if err := testbinaries.Link(ctx, "go", dir, binDir, pkgs, testbinaries.LinkOptions{}); err != nil {
		t.Fatal(err)
	}
	r := testbinaries.Run(ctx, binDir, pkgs[0], testbinaries.RunOptions{Timeout: time.Second})
	if r.Passed || !strings.Contains(string(r.Output), "test timed out after 1s") {
		t.Errorf("a test past its timeout: %s\n%s", r.Line(), r.Output)
	}
}

// The binaries are named as go test -c names them.
func TestBinaryNames(t *testing.T) {
	for path, want := range map[string]string{
		"example.com/m/a":     "a.test",
		"example.com/m/b/v2":  "b.test",
		"example.com/m/v1":    "v1.test",
		"example.com/m/c/v10": "c.test",
		"m":                   "m.test",
	} {
		if got := (testbinaries.Package{ImportPath: path}).Binary(); got != want {
			t.Errorf("%s: %s, want %s", path, got, want)
		}
	}
}

// Two packages whose binaries would have the same name are refused: one
// would run as the other.
func TestListRefusesTwoBinariesOfOneName(t *testing.T) {
	dir := module(t, map[string]string{
		"x/same/s_test.go": "package same\n\nimport \"testing\"\n\nfunc TestS(t *testing.T) {}\n",
		"y/same/s_test.go": "package same\n\nimport \"testing\"\n\nfunc TestS(t *testing.T) {}\n",
	})
	_, err := testbinaries.List(context.Background(), "go", dir, []string{"./..."})
	if err == nil || !strings.Contains(err.Error(), "example.com/m/x/same") || !strings.Contains(err.Error(), "example.com/m/y/same") {
		t.Errorf("two same.test binaries: %v", err)
	}
}

// A second run waits for the first to give the directory back.
func TestLockWaitsForTheOtherRun(t *testing.T) {
	binDir := t.TempDir()
	unlock, err := testbinaries.Lock(context.Background(), binDir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err := testbinaries.Lock(ctx, binDir); err == nil {
		t.Fatal("a second run took the directory while the first held it")
	}
	unlock()
	unlockAgain, err := testbinaries.Lock(context.Background(), binDir)
	if err != nil {
		t.Fatal(err)
	}
	unlockAgain()
}
