package gridweave_test

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"gridweave.dev/gridweave"
	"gridweave.dev/internal/browsertest"
	"gridweave.dev/internal/netnstest"
)

// TestConsoleOnlyWhereABrowserCanTrustIt: with the key pair the server
// made itself, Chromium (told to accept that key, as an administrator who
// clicked through the warning would be) gets the console on loopback and
// a refusal from another address of the host; CONSOLE_PUBLIC=on, or a
// certificate of the operator's (TLS_CERT_FILE), serves it there too.
func TestConsoleOnlyWhereABrowserCanTrustIt(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser; needs root for a second address")
	}
	netnstest.RequireRoot(t)
	// A second address of this host, on a device of the test's own (a veth
	// pair: this kernel has no dummy devices).
	const other = "198.18.231.1"
	dev := netnstest.UniqueName("gwc")
	netnstest.IP(t, "link", "add", dev, "type", "veth", "peer", "name", dev+"p")
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", dev).Run() })
	netnstest.IP(t, "address", "add", other+"/32", "dev", dev)
	netnstest.IP(t, "link", "set", dev, "up")

	serve := func(t *testing.T, h *harness, host string) string {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: h.server.Handler(), TLSConfig: &tls.Config{Certificates: []tls.Certificate{h.tls.Certificate}}, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.ServeTLS(l, "", "") }()
		t.Cleanup(func() { _ = srv.Close() })
		return "https://" + l.Addr().String()
	}
	pin := func(h *harness) string { return strings.TrimPrefix(h.tls.Pin.String(), "sha256//") }
	page := func(t *testing.T, b *browsertest.Browser, url string) string {
		ctx, cancel := context.WithTimeout(b.Ctx, 30*time.Second)
		defer cancel()
		if err := chromedp.Do(ctx, chromedp.Navigate(url+"/ui/")); err != nil {
			t.Fatalf("open %s/ui/: %v", url, err)
		}
		text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("html")))
		if err != nil {
			t.Fatalf("read %s/ui/: %v", url, err)
		}
		return text
	}

	own := newHarness(t, &harnessOptions{tls: true})
	b := browsertest.StartTrusting(t, 1200, 800, pin(own))
	if got := page(t, b, serve(t, own, "127.0.0.1")); strings.Contains(got, "console_loopback_only") || !strings.Contains(got, "Gridweave") {
		t.Errorf("the console on loopback: %.300s", got)
	}
	if got := page(t, b, serve(t, own, other)); !strings.Contains(got, "console_loopback_only") || !strings.Contains(got, "ssh -L") {
		t.Errorf("the console from %s with the server's own certificate: %.300s", other, got)
	}

	for name, change := range map[string]func(*gridweave.Config){
		"CONSOLE_PUBLIC=on": func(c *gridweave.Config) { c.ConsolePublic = true },
		"TLS_CERT_FILE": func(c *gridweave.Config) {
			c.TLSCertFile, c.TLSKeyFile = "/etc/gridweave/tls.crt", "/etc/gridweave/tls.key"
		},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, &harnessOptions{tls: true, config: change})
			b := browsertest.StartTrusting(t, 1200, 800, pin(h))
			if got := page(t, b, serve(t, h, other)); strings.Contains(got, "console_loopback_only") || !strings.Contains(got, "Gridweave") {
				t.Errorf("the console from %s with %s: %.300s", other, name, got)
			}
		})
	}
}
