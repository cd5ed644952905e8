package tlspin_test

import (
	"crypto/tls"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gridweave.dev/gridweave/tlspin"
)

var addrs = []netip.Addr{netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.19.0.1")}

func TestLoadOrCreateKeepsThePair(t *testing.T) {
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	first, err := tlspin.LoadOrCreate(cert, key, addrs)
	if err != nil {
		t.Fatal(err)
	}
	if !first.Created || len(first.Missing) != 0 {
		t.Fatalf("first start: created %v, missing %v", first.Created, first.Missing)
	}
	info, err := os.Stat(key)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("the key file is %v, want 0600", info.Mode().Perm())
	}
	again, err := tlspin.LoadOrCreate(cert, key, addrs)
	if err != nil {
		t.Fatal(err)
	}
	if again.Created || again.Pin != first.Pin {
		t.Fatalf("second start: created %v, pin %s, want the kept pin %s", again.Created, again.Pin, first.Pin)
	}
	moved, err := tlspin.LoadOrCreate(cert, key, []netip.Addr{netip.MustParseAddr("198.18.9.9")})
	if err != nil {
		t.Fatal(err)
	}
	if len(moved.Missing) != 1 || moved.Missing[0].String() != "198.18.9.9" || moved.Pin != first.Pin {
		t.Fatalf("a changed address: missing %v, pin %s", moved.Missing, moved.Pin)
	}
}

func TestLoadOrCreateRefusesHalfAPair(t *testing.T) {
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if _, err := tlspin.LoadOrCreate(cert, key, addrs); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(cert); err != nil {
		t.Fatal(err)
	}
	_, err := tlspin.LoadOrCreate(cert, key, addrs)
	if err == nil || !strings.Contains(err.Error(), "tls.crt") {
		t.Fatalf("a key without its certificate: %v, want an error naming the missing file", err)
	}
	if _, statErr := os.Stat(cert); statErr == nil {
		t.Fatal("a new certificate was made for the kept key")
	}
}

func TestParse(t *testing.T) {
	kp, err := tlspin.LoadOrCreate(filepath.Join(t.TempDir(), "c"), filepath.Join(t.TempDir(), "k"), addrs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tlspin.Parse(kp.Pin.String())
	if err != nil || got != kp.Pin {
		t.Fatalf("Parse(String()) = %s, %v", got, err)
	}
	for _, bad := range []string{"", "sha256//", "sha256//abc", "sha1//" + strings.TrimPrefix(kp.Pin.String(), "sha256//"), strings.TrimPrefix(kp.Pin.String(), "sha256//")} {
		if _, err := tlspin.Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

// pinnedServer serves "pinned" over TLS with a fresh key pair.
func pinnedServer(t *testing.T) (*httptest.Server, tlspin.KeyPair) {
	t.Helper()
	dir := t.TempDir()
	kp, err := tlspin.LoadOrCreate(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), []netip.Addr{netip.MustParseAddr("127.0.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("pinned")) }))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{kp.Certificate}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, kp
}

func TestClientConfigAcceptsOnlyThePinnedKey(t *testing.T) {
	srv, kp := pinnedServer(t)
	_, other := pinnedServer(t)
	get := func(pin tlspin.Pin) error {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: tlspin.ClientConfig(pin)}}
		resp, err := c.Get(srv.URL)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get(kp.Pin); err != nil {
		t.Fatalf("the pinned key: %v", err)
	}
	err := get(other.Pin)
	if !errors.Is(err, tlspin.ErrPinMismatch) {
		t.Fatalf("another key: %v, want ErrPinMismatch", err)
	}
}

// The pin is the form curl's --pinnedpubkey takes: curl accepts the
// server with it and refuses the server with another.
func TestPinIsCurls(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Fatal("curl is needed (.ci/run installs it)")
	}
	srv, kp := pinnedServer(t)
	_, other := pinnedServer(t)
	out, err := exec.Command(curl, "-fsS", "--pinnedpubkey", kp.Pin.String(), "-k", srv.URL).CombinedOutput()
	if err != nil || string(out) != "pinned" {
		t.Fatalf("curl with the pin: %v: %s", err, out)
	}
	out, err = exec.Command(curl, "-fsS", "--pinnedpubkey", other.Pin.String(), "-k", srv.URL).CombinedOutput()
	if err == nil {
		t.Fatalf("curl with another pin fetched %q", out)
	}
}
