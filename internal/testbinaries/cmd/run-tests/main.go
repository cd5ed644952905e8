// Command run-tests runs a module's tests as go test -count=1 does, from
// test binaries kept between runs (package testbinaries): a warm run links
// only the test binaries a change touched, then runs every test.
//
//	go run ./internal/testbinaries/cmd/run-tests [-short] [-race] [-run regexp] [-v] [-p n] [-parallel n] [-timeout d] [packages]
//
// It first compiles every package matched, those without tests too, as
// go test does. The binaries link in batches, slowest package of the last
// run first, each batch's tests running while the next links; a batch
// that does not build stops the run there, so that no binary that may be
// stale runs. An interrupt (SIGINT, SIGTERM) passes SIGINT on to the
// binaries running and starts nothing more. It prints go test's summary
// line for each package (ok or FAIL, the package, the time), a failing
// package's output before its line (every package's with -v), then the
// processor time of each package that used a second or more, and exits 1
// if a package failed or did not build.
//
// The binaries are kept in <user cache dir>/gridweave/test-binaries/, one
// directory per checkout (-bin names another; -clean removes them all);
// deleting them only costs a full link. A run removes the binaries of the
// checkouts that are gone, unless a run holds them. The packages' times
// are kept there too, so that a new checkout's first run also starts its
// slowest package first. It leaves out go test's vet checks: `make lint`
// runs go vet on every package.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"gridweave.dev/internal/testbinaries"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "run-tests:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer, stderr *os.File) error {
	fs := flag.NewFlagSet("run-tests", flag.ContinueOnError)
	short := fs.Bool("short", false, "run the tests with -test.short")
	race := fs.Bool("race", false, "build the binaries with the race detector")
	runPattern := fs.String("run", "", "run only the tests matching this regexp (-test.run)")
	verbose := fs.Bool("v", false, "print every package's output (-test.v)")
	parallel := fs.Int("p", 4, "packages run at once; tests that wait on timers leave cores idle, so more than the CPUs")
	testParallel := fs.Int("parallel", runtime.GOMAXPROCS(0), "a package's parallel tests run at once (-test.parallel)")
	timeout := fs.Duration("timeout", 10*time.Minute, "each binary's -test.timeout (0: none)")
	binDir := fs.String("bin", "", "where the test binaries are kept (default: one directory per checkout in the user cache)")
	clean := fs.Bool("clean", false, "remove every checkout's kept test binaries and exit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *clean {
		root, err := cacheRoot()
		if err != nil {
			return err
		}
		return os.RemoveAll(root)
	}
	if *parallel < 1 || *testParallel < 1 {
		return fmt.Errorf("-p %d -parallel %d: at least one package and one test must run at a time", *parallel, *testParallel)
	}
	patterns := fs.Args()
	if len(patterns) == 0 {
		patterns = []string{"./..."}
	}
	moduleDir, err := os.Getwd()
	if err != nil {
		return err
	}
	// shared keeps the packages' times of the last run in any checkout:
	// a new checkout (CI's clone) starts its slowest packages first too.
	shared := ""
	if *binDir == "" {
		if *binDir, err = defaultBinDir(moduleDir, *race); err != nil {
			return err
		}
		if shared, err = cacheRoot(); err != nil {
			return err
		}
		if err := keepCheckout(filepath.Dir(*binDir), moduleDir); err != nil {
			return err
		}
		removeVanishedCheckouts(shared, stderr)
	}
	if *binDir, err = filepath.Abs(*binDir); err != nil { // the binaries run in their packages' directories
		return err
	}
	unlock, err := testbinaries.Lock(ctx, *binDir)
	if err != nil {
		return err
	}
	defer unlock()

	const goCmd = "go"
	goBin, err := testbinaries.GoBin(ctx, goCmd)
	if err != nil {
		return err
	}
	pkgs, err := testbinaries.List(ctx, goCmd, moduleDir, patterns)
	if err != nil {
		return err
	}
	opts := testbinaries.RunOptions{Timeout: *timeout, GoBin: goBin, Args: []string{"-test.parallel=" + strconv.Itoa(*testParallel)}}
	if *short {
		opts.Args = append(opts.Args, "-test.short")
	}
	if *runPattern != "" {
		opts.Args = append(opts.Args, "-test.run="+*runPattern)
	}
	if *verbose {
		opts.Args = append(opts.Args, "-test.v=true")
	}
	// The packages that took longest last time link and start first, so
	// that the slowest does not start last and run alone.
	timingsName := timingsFile(*short, *race)
	timings := loadTimings(*binDir, timingsName)
	if shared != "" {
		for p, s := range loadTimings(shared, timingsName) {
			if _, ok := timings[p]; !ok {
				timings[p] = s
			}
		}
	}
	sort.SliceStable(pkgs, func(i, j int) bool { return timings.last(pkgs[i]) > timings.last(pkgs[j]) })

	// The binaries link in batches, each batch's tests running while the
	// next links: after a change that touched many, the links and the
	// tests share the cores instead of taking turns.
	link := testbinaries.LinkOptions{Race: *race, Stderr: stderr}
	began := time.Now()
	batches := make(chan []testbinaries.Package)
	var linkErr error
	go func() {
		defer close(batches)
		for rest, size := pkgs, 4; len(rest) > 0; size *= 2 {
			batch := rest[:min(size, len(rest))]
			rest = rest[len(batch):]
			if linkErr = testbinaries.Link(ctx, goCmd, moduleDir, *binDir, batch, link); linkErr != nil {
				return // a binary of this batch or after it may be stale: none of them runs
			}
			select {
			case batches <- batch:
			case <-ctx.Done():
				return
			}
		}
	}()
	var (
		printing sync.Mutex
		failed   int
		ran      int
		cpu      = map[string]time.Duration{}
		wg       sync.WaitGroup
	)
	slots := make(chan struct{}, *parallel)
	for batch := range batches {
		for _, p := range batch {
			if ctx.Err() != nil {
				break // interrupted: start nothing more
			}
			wg.Add(1)
			slots <- struct{}{}
			go func() {
				defer func() { <-slots; wg.Done() }()
				r := testbinaries.Run(ctx, *binDir, p, opts)
				printing.Lock()
				defer printing.Unlock()
				if !r.Passed || *verbose {
					stdout.Write(r.Output)
				}
				if !r.Passed {
					failed++
				}
				ran++
				cpu[p.ImportPath] = r.CPU
				if ctx.Err() == nil { // an interrupted package's time says nothing of the next run
					timings[p.ImportPath] = r.Elapsed.Seconds()
				}
				fmt.Fprintln(stdout, r.Line())
			}()
		}
	}
	wg.Wait()
	printCPU(stdout, cpu)
	for _, dir := range []string{*binDir, shared} {
		if dir == "" || (dir == shared && *runPattern != "") {
			continue // a run of some tests says little of a package's time
		}
		if err := timings.save(dir, timingsName); err != nil {
			fmt.Fprintln(stderr, "run-tests: keep the packages' times for the next run:", err)
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if linkErr != nil {
		fmt.Fprintf(stdout, "FAIL\t(build: %d of %d packages did not run)\n", len(pkgs)-ran, len(pkgs))
		return linkErr
	}
	fmt.Fprintf(stdout, "%d packages in %.1fs (only the test binaries a change touched were linked again)\n", len(pkgs), time.Since(began).Seconds())
	if failed > 0 {
		return fmt.Errorf("%d of %d packages failed", failed, len(pkgs))
	}
	return ctx.Err()
}

// printCPU prints the processor time of each package that took at least
// a second of it, most first: the binary and the processes it waited for
// (a control plane, Ray, a kubelet), not those that left its tree (a
// pod's container, under its shim). On a machine whose cores are all
// busy, this is where a run's time goes.
func printCPU(w io.Writer, cpu map[string]time.Duration) {
	pkgs := make([]string, 0, len(cpu))
	var total time.Duration
	for p, d := range cpu {
		total += d
		if d >= time.Second {
			pkgs = append(pkgs, p)
		}
	}
	if len(pkgs) == 0 {
		return
	}
	sort.Slice(pkgs, func(i, j int) bool { return cpu[pkgs[i]] > cpu[pkgs[j]] })
	fmt.Fprintf(w, "processor seconds by package (%.0f in all; with the processes each waited for):\n", total.Seconds())
	for _, p := range pkgs {
		fmt.Fprintf(w, "  %-52s %7.1f\n", p, cpu[p].Seconds())
	}
}

// timings are how long each package's tests took in the last run, in
// seconds, kept beside the binaries (and, for the default directories, in
// the cache's root for the next new checkout).
type timings map[string]float64

// timingsFile names the times of a run with or without -short and
// -race: each orders the packages its own way.
func timingsFile(short, race bool) string {
	name := "timings-full"
	if short {
		name = "timings-short"
	}
	if race {
		name += "-race"
	}
	return name + ".json"
}

func loadTimings(dir, name string) timings {
	t := timings{}
	if b, err := os.ReadFile(filepath.Join(dir, name)); err == nil {
		_ = json.Unmarshal(b, &t) // unreadable: every package is new
	}
	return t
}

// last is how long p took last time; a package never run counts as the
// slowest, since nothing says it is quick.
func (t timings) last(p testbinaries.Package) float64 {
	if s, ok := t[p.ImportPath]; ok {
		return s
	}
	return math.Inf(1)
}

// save writes the times whole (renamed into place): runs in two
// checkouts may save the shared copy at once.
func (t timings) save(dir, name string) error {
	b, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, name+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, name))
}

// checkoutFile, in a checkout's directory of binaries, names the
// checkout they were built from.
const checkoutFile = "checkout"

// keepCheckout records, in a checkout's directory of binaries, which
// checkout it serves.
func keepCheckout(dir, moduleDir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	path := filepath.Join(dir, checkoutFile)
	if b, err := os.ReadFile(path); err == nil && string(b) == moduleDir {
		return nil
	}
	return os.WriteFile(path, []byte(moduleDir), 0o644)
}

// removeVanishedCheckouts removes the binaries of the checkouts that no
// longer exist (a CI clone, a worktree removed): about 1.7 GB each. A
// directory that names no checkout, or names it by a relative path, is
// left alone, and so is one whose binaries a run holds (its checkout
// may be out of sight: another mount namespace, a disk not mounted).
func removeVanishedCheckouts(root string, stderr io.Writer) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(root, e.Name())
		moduleDir, err := os.ReadFile(filepath.Join(dir, checkoutFile))
		if err != nil || !filepath.IsAbs(string(moduleDir)) {
			continue
		}
		if _, err := os.Stat(filepath.Join(string(moduleDir), "go.mod")); !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		release, held := holdIdle(dir)
		if !held {
			continue
		}
		err = os.RemoveAll(dir)
		release()
		if err != nil {
			fmt.Fprintf(stderr, "run-tests: remove the binaries of %s, which is gone: %v\n", moduleDir, err)
		}
	}
}

// holdIdle takes the locks of a checkout's directories of binaries (one
// per build mode) without waiting: held is false when a run holds one.
func holdIdle(dir string) (release func(), held bool) {
	var files []*os.File
	release = func() {
		for _, f := range files {
			f.Close()
		}
	}
	for _, mode := range []string{"plain", "race"} {
		f, err := os.Open(filepath.Join(dir, mode, ".lock"))
		if errors.Is(err, fs.ErrNotExist) {
			continue // never built in this mode
		}
		if err != nil {
			release()
			return nil, false
		}
		files = append(files, f)
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			release()
			return nil, false
		}
	}
	return release, true
}

// defaultBinDir is the checkout's directory under the user cache: one
// per checkout, so that two checkouts never replace each other's
// binaries, and one per build mode, since go test -c names a package's
// binary the same with or without -race.
func defaultBinDir(moduleDir string, race bool) (string, error) {
	root, err := cacheRoot()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(moduleDir))
	mode := "plain"
	if race {
		mode = "race"
	}
	return filepath.Join(root, hex.EncodeToString(sum[:6]), mode), nil
}

// cacheRoot holds every checkout's test binaries.
func cacheRoot() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find the user cache dir (or give -bin): %w", err)
	}
	return filepath.Join(base, "gridweave", "test-binaries"), nil
}
