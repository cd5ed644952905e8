package testbinaries

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"
)

// Package is one package of the module that has tests.
type Package struct {
	ImportPath string
	// Dir is the package's source directory: its test binary runs there.
	Dir string
}

// Binary is the name Link gives the package's test binary in its
// directory, as go test -c names it: the last element of its import path
// (the one before a major version suffix such as /v2) with .test.
func (p Package) Binary() string {
	elems := strings.Split(p.ImportPath, "/")
	name := elems[len(elems)-1]
	if len(elems) > 1 && majorVersion.MatchString(name) {
		name = elems[len(elems)-2]
	}
	return name + ".test"
}

var majorVersion = regexp.MustCompile(`^v([2-9]|[1-9][0-9]+)$`)

// List returns the packages matching patterns (go list's) that have test
// files, in go list's order, run from dir with the go command goCmd. It
// compiles every package matched on the way (go list -export, without
// linking), those without tests too, as go test does: a package that
// does not compile is an error naming it.
func List(ctx context.Context, goCmd, dir string, patterns []string) ([]Package, error) {
	args := append([]string{"list", "-export", "-f", "{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}\t{{.Dir}}{{end}}", "--"}, patterns...)
	cmd := exec.CommandContext(ctx, goCmd, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s: %w: %s", strings.Join(patterns, " "), err, strings.TrimSpace(stderr.String()))
	}
	var pkgs []Package
	seen := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		importPath, pkgDir, ok := strings.Cut(sc.Text(), "\t")
		if !ok {
			continue
		}
		p := Package{ImportPath: importPath, Dir: pkgDir}
		if other, taken := seen[p.Binary()]; taken {
			return nil, fmt.Errorf("packages %s and %s would both link %s: run them apart", other, importPath, p.Binary())
		}
		seen[p.Binary()] = importPath
		pkgs = append(pkgs, p)
	}
	return pkgs, sc.Err()
}

// LinkOptions are the build settings of the test binaries.
type LinkOptions struct {
	// Race builds with the race detector.
	Race bool
	// Stderr receives the go command's output (its compile errors); nil
	// discards it.
	Stderr *os.File
}

// Link builds the test binaries of pkgs into binDir (made if missing)
// with one go test -c, run from dir: without DWARF or a symbol table (as
// go test links the binaries it runs) and without go test's vet checks
// (go vet runs them on its own). The go command skips the link of every
// binary already built from the same inputs. Its work directory is in
// binDir, so that a binary is renamed into place, whole, never copied
// over the old one: a link cut short leaves the old binary or none, which
// the next link replaces. An error means some did not build: then none of
// pkgs' binaries may be taken as current.
func Link(ctx context.Context, goCmd, dir, binDir string, pkgs []Package, opts LinkOptions) error {
	if len(pkgs) == 0 {
		return nil
	}
	work := filepath.Join(binDir, ".work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	args := []string{"test", "-c", "-vet=off", "-ldflags=-s -w", "-o", binDir + string(filepath.Separator)}
	if opts.Race {
		args = append(args, "-race")
	}
	for _, p := range pkgs {
		args = append(args, p.ImportPath)
	}
	cmd := exec.CommandContext(ctx, goCmd, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOTMPDIR="+work)
	cmd.Stdout = opts.Stderr
	cmd.Stderr = opts.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build the test binaries: %w", err)
	}
	return nil
}

// Result is how one package's tests went.
type Result struct {
	Package Package
	// Passed is false when the binary failed or could not run.
	Passed bool
	// Output is what the binary wrote, stdout and stderr in order,
	// followed by why it was stopped or could not start, if it was.
	Output  []byte
	Elapsed time.Duration
	// CPU is the processor time (user and system) of the binary and of
	// the processes it waited for: a control plane, Ray, a kubelet. A
	// process that left the binary's tree (a container, under its shim)
	// is not counted.
	CPU time.Duration
}

// Line is go test's summary line of the result: "ok  \t<pkg>\t<s>s" or
// "FAIL\t<pkg>\t<s>s".
func (r Result) Line() string {
	verdict := "ok  "
	if !r.Passed {
		verdict = "FAIL"
	}
	return fmt.Sprintf("%s\t%s\t%.3fs", verdict, r.Package.ImportPath, r.Elapsed.Seconds())
}

// killGrace is how long past its own -test.timeout a binary may run
// before Run stops it (with SIGQUIT, for its goroutines' stacks) and then
// how long it has to write them out; go test waits about as long.
const killGrace = time.Minute

// RunOptions say how Run runs a test binary.
type RunOptions struct {
	// Timeout is the binary's own -test.timeout (go test's -timeout); Run
	// stops a binary that outlives it by a minute (with SIGQUIT, for its
	// goroutines' stacks). Zero is no timeout.
	Timeout time.Duration
	// Args are more -test.* flags (-test.short, -test.run=...).
	Args []string
	// GoBin is the directory of the go command that built the binaries:
	// first on the binary's PATH, as go test puts it, for the tests that
	// build or run Go themselves. Empty leaves PATH alone.
	GoBin string
}

// GoBin returns the bin directory of goCmd's Go installation.
func GoBin(ctx context.Context, goCmd string) (string, error) {
	out, err := exec.CommandContext(ctx, goCmd, "env", "GOROOT").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOROOT: %w", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "bin"), nil
}

// Run runs the package's test binary from binDir in the package's
// directory, as go test runs it. When ctx ends (an interrupt), the binary
// gets SIGINT and ends as it would under go test.
func Run(ctx context.Context, binDir string, p Package, opts RunOptions) Result {
	runCtx, cancel := ctx, context.CancelFunc(func() {})
	if opts.Timeout > 0 {
		runCtx, cancel = context.WithTimeout(ctx, opts.Timeout+killGrace)
	}
	defer cancel()
	argv := append([]string{"-test.paniconexit0", "-test.timeout=" + opts.Timeout.String()}, opts.Args...)
	cmd := exec.CommandContext(runCtx, filepath.Join(binDir, p.Binary()), argv...)
	cmd.Dir = p.Dir
	cmd.Env = append(os.Environ(), "PWD="+p.Dir)
	if opts.GoBin != "" {
		cmd.Env = append(cmd.Env, "PATH="+opts.GoBin+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	cmd.Cancel = func() error {
		if ctx.Err() != nil {
			return cmd.Process.Signal(os.Interrupt)
		}
		return cmd.Process.Signal(syscall.SIGQUIT)
	}
	cmd.WaitDelay = killGrace
	began := time.Now()
	err := cmd.Run()
	r := Result{Package: p, Passed: err == nil, Elapsed: time.Since(began)}
	if cmd.ProcessState != nil {
		r.CPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	if err != nil {
		if out.Len() > 0 && !bytes.HasSuffix(out.Bytes(), []byte("\n")) {
			out.WriteByte('\n')
		}
		switch {
		case ctx.Err() == nil && runCtx.Err() != nil:
			fmt.Fprintf(&out, "*** Test killed with quit: ran too long (%v).\n", opts.Timeout+killGrace)
		case out.Len() == 0 || !exited(err):
			fmt.Fprintln(&out, err)
		}
	}
	r.Output = out.Bytes()
	return r
}

// exited reports whether err is a process that ended by itself (with a
// status), not one that could not start or was killed.
func exited(err error) bool {
	var ee *exec.ExitError
	return errors.As(err, &ee) && ee.Exited()
}

// Lock takes binDir for this process alone (made if missing): a second
// run linking into the same directory waits, since a link would replace
// binaries the first one is running. The returned function gives it back.
func Lock(ctx context.Context, binDir string) (unlock func(), err error) {
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(binDir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", binDir, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("wait for another run using %s: %w", binDir, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
