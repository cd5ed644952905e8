package browsertest

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// Chromium is Debian's chromium, which .ci/run installs.
func Chromium(t testing.TB) string {
	t.Helper()
	for _, p := range []string{"chromium", "/usr/bin/chromium"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	t.Fatal("chromium is not installed (apt-get install chromium; .ci/run does it); use -short to leave out the browser tests")
	return ""
}

// Browser is a headless Chromium with one tab.
type Browser struct {
	// Ctx runs actions in the tab (chromedp.Do, chromedp.Run).
	Ctx context.Context

	mu       sync.Mutex
	requests []string
	errs     []string
}

// Start starts Chromium with a window of width × height and begins
// recording. It stops when the test ends.
func Start(t testing.TB, width, height int) *Browser {
	t.Helper()
	return StartTrusting(t, width, height)
}

// StartTrusting is Start with Chromium trusting, besides its own roots,
// the certificates whose public keys have the SHA-256 pins given (the
// base64 of the SHA-256 of the SubjectPublicKeyInfo, as curl's
// --pinnedpubkey takes after sha256//): a server's own self-signed pair,
// as an administrator who clicked through the warning would.
func StartTrusting(t testing.TB, width, height int, spkiPins ...string) *Browser {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(Chromium(t)),
		chromedp.Flag("headless", "new"),
		chromedp.NoSandbox, // as root
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		// No machine here reaches the internet; keep Chromium from trying.
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-breakpad", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-features", "Translate,OptimizationHints,MediaRouter"),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("password-store", "basic"),
		chromedp.UserDataDir(t.TempDir()),
		// Chromium's own scratch directories (its singleton socket's)
		// go in one of the test's, removed with it.
		chromedp.Env("TMPDIR=" + scratchDir(t)),
		chromedp.WindowSize(width, height),
	}
	if len(spkiPins) > 0 {
		opts = append(opts, chromedp.Flag("ignore-certificate-errors-spki-list", strings.Join(spkiPins, ",")))
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(alloc, chromedp.WithLogf(t.Logf))
	t.Cleanup(cancel)
	b := &Browser{Ctx: ctx}
	if err := chromedp.Listen(ctx, b.record); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(int64(width), int64(height))); err != nil {
		t.Fatalf("chromium's viewport: %v", err)
	}
	return b
}

func (b *Browser) record(ev any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch ev := ev.(type) {
	case *network.EventRequestWillBeSent:
		b.requests = append(b.requests, ev.Request.URL)
	case *runtime.EventExceptionThrown:
		text := ev.ExceptionDetails.Text
		if d := ev.ExceptionDetails; d != nil && d.Exception != nil {
			text += " " + d.Exception.Description
		}
		b.errs = append(b.errs, "exception: "+text)
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError {
			var parts []string
			for _, a := range ev.Args {
				if len(a.Value) > 0 {
					parts = append(parts, string(a.Value))
				} else if a.Description != "" {
					parts = append(parts, a.Description)
				}
			}
			b.errs = append(b.errs, "console.error: "+strings.Join(parts, " "))
		}
	case *log.EventEntryAdded:
		// A refused API call's 4xx is the page's business, not an error.
		if ev.Entry.Level == log.EntryLevelError && !strings.Contains(ev.Entry.Text, "the server responded with a status of 4") {
			b.errs = append(b.errs, "log: "+ev.Entry.Text+" "+ev.Entry.URL)
		}
	}
}

// Requests returns every URL the page asked for so far.
func (b *Browser) Requests() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.requests)
}

// Errors returns every error the page logged so far.
func (b *Browser) Errors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.errs)
}

// CheckOnlyOrigin fails the test for every request that went anywhere but
// origin (data: URLs are the page's own) and every error the page logged.
func (b *Browser) CheckOnlyOrigin(t testing.TB, origin string) {
	t.Helper()
	for _, u := range b.Requests() {
		if !strings.HasPrefix(u, origin+"/") && !strings.HasPrefix(u, "data:") {
			t.Errorf("the page requested %s, which is not %s", u, origin)
		}
	}
	for _, e := range b.Errors() {
		t.Errorf("the page logged an error: %s", e)
	}
}

// scratchDir is a directory removed when the test ends, at a short path:
// a Unix socket's path in it must fit in 108 bytes, which t.TempDir's,
// named after the test, may not.
func scratchDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "gw-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}
