package joinagent_test

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"sync/atomic"
	"testing"

	"gridweave.dev/gridweave"
	"gridweave.dev/gridweave/node/gpus"
	"gridweave.dev/gridweave/node/joinagent"
	"gridweave.dev/gridweave/tlspin"
	"gridweave.dev/joinkeys"
	"gridweave.dev/joinkeys/memstore"
	"gridweave.dev/mesh/memmesh"
	"gridweave.dev/mesh/wgkey"
	"gridweave.dev/rayctl/rayctltest"
)

// counted serves h and counts the requests by path.
type counted struct {
	srv   *httptest.Server
	calls map[string]*atomic.Int64
}

func (c counted) count(path string) int64 {
	if n, ok := c.calls[path]; ok {
		return n.Load()
	}
	return 0
}

func countCalls(h http.Handler, paths ...string) (http.Handler, map[string]*atomic.Int64) {
	calls := map[string]*atomic.Int64{}
	for _, p := range paths {
		calls[p] = new(atomic.Int64)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n, ok := calls[r.URL.Path]; ok {
			n.Add(1)
		}
		h.ServeHTTP(w, r)
	}), calls
}

// TestJoinCallsThroughTheTunnel: validate goes to the public listener
// (HTTPS, pinned); once the tunnel is up, register, report-version and
// leave go to the VPN listener validate named. When the tunnel no longer
// answers, leave falls back to the public listener.
func TestJoinCallsThroughTheTunnel(t *testing.T) {
	ctx := context.Background()
	// The "VPN" is loopback here: the fake tunnel brings nothing up, and
	// the VPN listener is reached directly.
	vpnLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := gridweave.DefaultConfig()
	cfg.AdminToken, cfg.JWTSecret, cfg.ServerVersion = adminToken, "jwt-secret-for-agent-tests-0123456789", "1.2.0"
	cfg.MasterIP, cfg.VPNCIDR, cfg.MasterVPNIP, cfg.TLS = "198.18.0.1", netip.MustParsePrefix("127.0.0.0/24"), netip.MustParseAddr("127.0.0.1"), "on"
	dir := t.TempDir()
	kp, err := tlspin.LoadOrCreate(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.PublicPin, cfg.VPNURL = kp.Pin.String(), "http://"+vpnLn.Addr().String()
	pool, _ := joinkeys.NewPool(cfg.VPNCIDR, cfg.MasterVPNIP)
	kr, _ := joinkeys.New(new(memstore.Store), &joinkeys.Options{JWTSecret: []byte(cfg.JWTSecret), Pool: pool})
	_, pub, _ := wgkey.GeneratePair()
	f := rayctltest.New(t, cfg.Namespace)
	s, err := gridweave.New(ctx, cfg, gridweave.Backends{Keyring: kr, Mesh: memmesh.New(pub), Ray: f.Client, Kube: f.Kube})
	if err != nil {
		t.Fatal(err)
	}
	steps := []string{"/v1/nodes/validate", "/v1/nodes/register", "/v1/nodes/report-version", "/v1/nodes/leave"}
	publicHandler, publicCalls := countCalls(s.Handler(), steps...)
	public := httptest.NewUnstartedServer(publicHandler)
	public.TLS = &tls.Config{Certificates: []tls.Certificate{kp.Certificate}}
	public.StartTLS()
	t.Cleanup(public.Close)
	vpnHandler, vpnCalls := countCalls(s.VPNHandler(), steps...)
	vpn := httptest.NewUnstartedServer(vpnHandler)
	vpn.Listener.Close()
	vpn.Listener = vpnLn
	vpn.Start()
	t.Cleanup(vpn.Close)
	publicSide, vpnSide := counted{public, publicCalls}, counted{vpn, vpnCalls}

	pinned := &http.Client{Transport: &http.Transport{TLSClientConfig: tlspin.ClientConfig(kp.Pin)}}
	opts := joinagent.Options{Master: public.URL, MasterPin: kp.Pin.String(), StateDir: t.TempDir(), Key: mintKeyWith(t, pinned, public.URL),
		Hostname: "tunnel-box", Version: "1.2.3", Tunnel: &fakeTunnel{}, DetectGPUs: func(context.Context) ([]gpus.GPU, error) { return nil, nil }}
	res, err := joinagent.Join(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !netip.MustParsePrefix("127.0.0.0/24").Contains(res.VPNIP) {
		t.Fatalf("joined with %s", res.VPNIP)
	}
	for _, c := range []struct {
		side       counted
		name, path string
		want       int64
	}{
		{publicSide, "public", "/v1/nodes/validate", 1},
		{publicSide, "public", "/v1/nodes/register", 0},
		{publicSide, "public", "/v1/nodes/report-version", 0},
		{vpnSide, "VPN", "/v1/nodes/register", 1},
		{vpnSide, "VPN", "/v1/nodes/report-version", 1},
	} {
		if got := c.side.count(c.path); got != c.want {
			t.Errorf("%s listener: %d calls of %s, want %d", c.name, got, c.path, c.want)
		}
	}
	if err := joinagent.Leave(ctx, opts); err != nil {
		t.Fatal(err)
	}
	if vpnSide.count("/v1/nodes/leave") != 1 || publicSide.count("/v1/nodes/leave") != 0 {
		t.Errorf("leave: %d through the tunnel, %d public", vpnSide.count("/v1/nodes/leave"), publicSide.count("/v1/nodes/leave"))
	}

	// Joined again, then the machine restarts and its tunnel device is
	// gone: leave does not send the node token to the VPN address by
	// another route (something answers there), it leaves at the public
	// URL.
	opts.Key = mintKeyWith(t, pinned, public.URL)
	if _, err := joinagent.Join(ctx, opts); err != nil {
		t.Fatal(err)
	}
	rebooted := opts
	rebooted.Tunnel = goneDevice{&fakeTunnel{}}
	if err := joinagent.Leave(ctx, rebooted); err != nil {
		t.Fatalf("leave with the tunnel device gone: %v", err)
	}
	if vpnSide.count("/v1/nodes/leave") != 1 || publicSide.count("/v1/nodes/leave") != 1 {
		t.Errorf("leave with the device gone: %d calls to the VPN address, %d public; want 1 (the first leave) and 1", vpnSide.count("/v1/nodes/leave"), publicSide.count("/v1/nodes/leave"))
	}

	// Joined again, then the tunnel stops answering: leave still reaches
	// the master, at its public URL.
	opts.Key = mintKeyWith(t, pinned, public.URL)
	if _, err := joinagent.Join(ctx, opts); err != nil {
		t.Fatal(err)
	}
	vpn.Close()
	if err := joinagent.Leave(ctx, opts); err != nil {
		t.Fatalf("leave with the tunnel down: %v", err)
	}
	if publicSide.count("/v1/nodes/leave") != 2 {
		t.Errorf("leave with the tunnel down: %d public calls", publicSide.count("/v1/nodes/leave"))
	}
	if _, err := kr.Node(ctx, "tunnel-box"); err == nil {
		t.Error("the node is still in the ledger after leave")
	}
}

// goneDevice is a tunnel whose device no longer exists (the machine
// restarted since the join).
type goneDevice struct{ *fakeTunnel }

func (goneDevice) Device() string { return "gwgone0" }
