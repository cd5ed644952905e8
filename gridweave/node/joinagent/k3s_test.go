package joinagent_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	neturl "net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gridweave.dev/gridweave"
	"gridweave.dev/gridweave/node/gpus"
	"gridweave.dev/gridweave/node/joinagent"
)

// TestJoinInstallsTheMastersK3s: a machine without k3s gets the master's
// (its SHA-256 checked) before the k3s step runs, once; a download that
// does not match the announced SHA-256 is not installed.
func TestJoinInstallsTheMastersK3s(t *testing.T) {
	ctx := context.Background()
	k3s := filepath.Join(t.TempDir(), "k3s")
	if err := os.WriteFile(k3s, []byte("#!/bin/sh\necho the master's k3s\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	url, _, _ := masterWith(t, func(c *gridweave.Config) { c.K3sBinary = k3s })
	target := filepath.Join(t.TempDir(), "usr", "local", "bin", "k3s")
	steps := 0
	opts := joinagent.Options{Master: url, StateDir: t.TempDir(), Key: mintKey(t, url), Hostname: "no-k3s-box", Version: "1.2.3", Tunnel: &fakeTunnel{},
		K3sBinary: target,
		K3sAgent: func(context.Context, joinagent.K3sJoin) error {
			if _, err := os.Stat(target); err != nil {
				t.Errorf("the k3s step ran before k3s was installed: %v", err)
			}
			steps++
			return nil
		},
		DetectGPUs: func(context.Context) ([]gpus.GPU, error) { return nil, nil }}
	if _, err := joinagent.Join(ctx, opts); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(target)
	fi, _ := os.Stat(target)
	if err != nil || string(got) != "#!/bin/sh\necho the master's k3s\n" || fi.Mode().Perm() != 0o755 || steps != 1 {
		t.Fatalf("installed %q (%v, mode %v), %d k3s steps", got, err, fi.Mode(), steps)
	}
	// Installed already: kept as it is.
	if err := os.WriteFile(target, []byte("the machine's own k3s"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := joinagent.Join(ctx, opts); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(target); string(got) != "the machine's own k3s" {
		t.Errorf("an installed k3s was replaced: %q", got)
	}

	// A master whose k3s does not match the SHA-256 it announces.
	to, _ := neturl.Parse(url)
	real := httputil.NewSingleHostReverseProxy(to)
	lying := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/k3s") {
			_, _ = w.Write([]byte("#!/bin/sh\necho something else\n"))
			return
		}
		real.ServeHTTP(w, r)
	}))
	t.Cleanup(lying.Close)
	other := filepath.Join(t.TempDir(), "k3s")
	bad := opts
	bad.Master, bad.K3sBinary, bad.StateDir, bad.Hostname, bad.Key = lying.URL, other, t.TempDir(), "lied-to-box", mintKey(t, url)
	if _, err := joinagent.Join(ctx, bad); err == nil || !strings.Contains(err.Error(), "not installing it") {
		t.Fatalf("a k3s that does not match its SHA-256: %v", err)
	}
	if _, err := os.Stat(other); err == nil {
		t.Error("a k3s that does not match its SHA-256 was installed")
	}
}
