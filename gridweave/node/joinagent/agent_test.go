package joinagent_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	neturl "net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"gridweave.dev/gridweave"
	"gridweave.dev/gridweave/node/gpus"
	"gridweave.dev/gridweave/node/joinagent"
	"gridweave.dev/gridweave/tlspin"
	"gridweave.dev/joinkeys"
	"gridweave.dev/joinkeys/memstore"
	"gridweave.dev/mesh"
	"gridweave.dev/mesh/memmesh"
	"gridweave.dev/mesh/wgkey"
	"gridweave.dev/rayctl/rayctltest"
)

const adminToken = "admin-token-for-agent-tests-0123"

// master is the real service over in-memory backends.
func master(t *testing.T) (url string, m mesh.Mesh, kr *joinkeys.Keyring) {
	return masterWith(t, nil)
}

// masterWith is master with more configuration (a worker image, say).
func masterWith(t *testing.T, change func(*gridweave.Config)) (url string, m mesh.Mesh, kr *joinkeys.Keyring) {
	t.Helper()
	url, m, kr = serveMaster(t, change, nil)
	return url, m, kr
}

// pinnedMaster is master over HTTPS with a key pair of its own; it
// returns the pin its join command carries.
func pinnedMaster(t *testing.T) (url string, pin tlspin.Pin, kr *joinkeys.Keyring) {
	t.Helper()
	dir := t.TempDir()
	kp, err := tlspin.LoadOrCreate(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), []netip.Addr{netip.MustParseAddr("127.0.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	url, _, kr = serveMaster(t, func(c *gridweave.Config) { c.TLS = "on" }, &kp)
	return url, kp.Pin, kr
}

// serveMaster serves the service, over TLS with kp when it is not nil.
func serveMaster(t *testing.T, change func(*gridweave.Config), kp *tlspin.KeyPair) (url string, m mesh.Mesh, kr *joinkeys.Keyring) {
	t.Helper()
	cfg := gridweave.DefaultConfig()
	cfg.AdminToken, cfg.JWTSecret, cfg.ServerVersion = adminToken, "jwt-secret-for-agent-tests-0123456789", "1.2.0"
	cfg.MasterIP, cfg.VPNCIDR, cfg.MasterVPNIP = "198.18.0.1", netip.MustParsePrefix("198.18.128.0/20"), netip.MustParseAddr("198.18.128.1")
	cfg.K3sURL = "https://198.18.128.1:6443"
	if change != nil {
		change(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var err error
	if kp != nil {
		cfg.PublicPin = kp.Pin.String()
	}
	if cfg.KubeletCAFile != "" { // as the server program reads it
		if cfg.KubeletCAPEM, err = os.ReadFile(cfg.KubeletCAFile); err != nil {
			t.Fatal(err)
		}
	}
	pool, _ := joinkeys.NewPool(cfg.VPNCIDR, cfg.MasterVPNIP)
	kr, _ = joinkeys.New(new(memstore.Store), &joinkeys.Options{JWTSecret: []byte(cfg.JWTSecret), Pool: pool})
	_, pub, _ := wgkey.GeneratePair()
	m = memmesh.New(pub)
	f := rayctltest.New(t, cfg.Namespace)
	s, err := gridweave.New(context.Background(), cfg, gridweave.Backends{Keyring: kr, Mesh: m, Ray: f.Client, Kube: f.Kube})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(s.Handler())
	if kp != nil {
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{kp.Certificate}}
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv.URL, m, kr
}

// manInTheMiddle terminates TLS with a key pair of its own and relays
// every request to target, counting them: what someone on the path
// between a machine and its master would run.
func manInTheMiddle(t *testing.T, target string) (url string, relayed *atomic.Int64) {
	t.Helper()
	dir := t.TempDir()
	kp, err := tlspin.LoadOrCreate(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), []netip.Addr{netip.MustParseAddr("127.0.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	to, _ := neturl.Parse(target)
	proxy := httputil.NewSingleHostReverseProxy(to)
	proxy.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	relayed = new(atomic.Int64)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		relayed.Add(1)
		proxy.ServeHTTP(w, r)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{kp.Certificate}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.URL, relayed
}

// The agent pins the master's key on every call: through the real
// master it joins; through a man in the middle that relays to the same
// master it stops at the handshake, before the key leaves the machine.
func TestJoinPinsTheMaster(t *testing.T) {
	ctx := context.Background()
	url, pin, kr := pinnedMaster(t)
	pinned := &http.Client{Transport: &http.Transport{TLSClientConfig: tlspin.ClientConfig(pin)}}
	opts := joinagent.Options{Master: url, MasterPin: pin.String(), StateDir: t.TempDir(), Key: mintKeyWith(t, pinned, url), Hostname: "pinned-box", Version: "1.2.3",
		Tunnel: &fakeTunnel{}, DetectGPUs: func(context.Context) ([]gpus.GPU, error) { return nil, nil }}

	mitm, relayed := manInTheMiddle(t, url)
	tunnel := &fakeTunnel{}
	attacked := opts
	attacked.Master, attacked.Tunnel, attacked.StateDir = mitm, tunnel, t.TempDir()
	_, err := joinagent.Join(ctx, attacked)
	if !errors.Is(err, tlspin.ErrPinMismatch) {
		t.Fatalf("through a man in the middle: %v, want the pin mismatch", err)
	}
	if relayed.Load() != 0 || len(tunnel.up) != 0 {
		t.Fatalf("through a man in the middle: %d requests relayed, %d tunnels up", relayed.Load(), len(tunnel.up))
	}
	if _, err := kr.Node(ctx, "pinned-box"); !errors.Is(err, joinkeys.ErrNodeNotFound) {
		t.Fatalf("the ledger after the attempt: %v", err)
	}
	if err := joinagent.Leave(ctx, attacked); err != nil {
		t.Fatalf("leave of a node that never joined: %v", err)
	}

	if _, err := joinagent.Join(ctx, opts); err != nil {
		t.Fatalf("the pinned master: %v", err)
	}
	if n, err := kr.Node(ctx, "pinned-box"); err != nil || n.Status != joinkeys.StatusRegistered {
		t.Fatalf("the ledger after the join: %+v, %v", n, err)
	}
	// The same master without the pin is refused too: its certificate
	// is self-signed, so only the pin makes it trusted.
	unpinned := opts
	unpinned.MasterPin, unpinned.StateDir = "", t.TempDir()
	if _, err := joinagent.Join(ctx, unpinned); err == nil {
		t.Fatal("an unpinned join trusted a self-signed master")
	}
	wrong := opts
	wrong.Master = strings.Replace(url, "https://", "http://", 1)
	if _, err := joinagent.Join(ctx, wrong); err == nil || !strings.Contains(err.Error(), "https") {
		t.Fatalf("a pin with an http master: %v", err)
	}
}

func mintKey(t *testing.T, url string) string { return mintKeyWith(t, http.DefaultClient, url) }

func mintKeyWith(t *testing.T, client *http.Client, url string) string {
	t.Helper()
	req, _ := http.NewRequest("POST", url+"/v1/nodes/join-keys", strings.NewReader(`{"kind":"org","org":"acme","ttl_seconds":600}`))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct{ Key string }
	if err := jsonDecode(resp, &out); err != nil || out.Key == "" {
		t.Fatalf("mint: %v", err)
	}
	return out.Key
}

// fakeTunnel records what the agent asked of the device.
type fakeTunnel struct {
	mu   sync.Mutex
	up   []joinagent.TunnelConfig
	down int
}

func (f *fakeTunnel) Up(_ context.Context, c joinagent.TunnelConfig) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.up = append(f.up, c)
	return nil
}

func (f *fakeTunnel) Down(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down++
	return nil
}

func TestJoinIsRepeatableAndLeaveCleansUp(t *testing.T) {
	ctx := context.Background()
	url, m, kr := master(t)
	key := mintKey(t, url)
	state := filepath.Join(t.TempDir(), "state")
	tunnel := &fakeTunnel{}
	var k3s []string
	opts := joinagent.Options{
		Master: url, StateDir: state, Key: key, Hostname: "gpu-box", Version: "1.2.3", Tunnel: tunnel,
		K3sAgent: func(_ context.Context, j joinagent.K3sJoin) error {
			k3s = append(k3s, fmt.Sprint(j.URL, " ", j.NodeIP, " ", j.NodeName, " ", j.NodeLabels))
			return nil
		},
		DetectGPUs: func(context.Context) ([]gpus.GPU, error) {
			return []gpus.GPU{{Index: 0, Vendor: "nvidia", Name: "NVIDIA H100 80GB HBM3", MemoryMiB: 81559, UUID: "GPU-1"}}, nil
		},
	}
	first, err := joinagent.Join(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if first.WorkerGroup == "" || first.GPUs != 1 || first.Rejoined || !netip.MustParsePrefix("198.18.128.0/20").Contains(first.VPNIP) {
		t.Errorf("first join %+v", first)
	}
	fi, err := os.Stat(filepath.Join(state, "identity.json"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("identity file: %v %v", fi, err)
	}
	if len(tunnel.up) != 1 || tunnel.up[0].Address.String() != first.VPNIP.String()+"/20" || tunnel.up[0].MasterEndpoint.String() != "198.18.0.1:51820" || len(k3s) != 1 ||
		!strings.HasPrefix(k3s[0], "https://198.18.128.1:6443 "+first.VPNIP.String()+" gpu-box [gridweave.dev/node=") {
		t.Errorf("tunnel %+v, k3s %v", tunnel.up, k3s)
	}
	node, _ := kr.Node(ctx, "gpu-box")
	if node.Status != joinkeys.StatusRegistered || node.Version != "1.2.3" {
		t.Errorf("ledger %+v", node)
	}
	// Again, even without the key: the node token re-joins to the same address.
	opts.Key = ""
	again, err := joinagent.Join(ctx, opts)
	if err != nil || again.VPNIP != first.VPNIP || !again.Rejoined {
		t.Fatalf("second join %+v, %v", again, err)
	}
	if peers, _ := m.Peers(ctx); len(peers) != 1 {
		t.Errorf("%d peers after two joins, want 1", len(peers))
	}
	if err := joinagent.Leave(ctx, opts); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(state, "identity.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the identity survived leave: %v", err)
	}
	if _, err := kr.Node(ctx, "gpu-box"); err == nil || tunnel.down != 1 {
		t.Errorf("after leave: ledger %v, tunnel downs %d", err, tunnel.down)
	}
	if err := joinagent.Leave(ctx, opts); err != nil {
		t.Errorf("leaving twice: %v", err)
	}
	// The master forgot the node (an earlier leave whose answer was lost,
	// or an administrator's disconnect): it answers the token 401, and
	// leave still takes the node's side down.
	opts.Key = mintKey(t, url)
	if _, err := joinagent.Join(ctx, opts); err != nil {
		t.Fatal(err)
	}
	if _, err := kr.Release(ctx, "gpu-box", "admin:test"); err != nil {
		t.Fatal(err)
	}
	if err := joinagent.Leave(ctx, opts); err != nil {
		t.Errorf("leave of a node the master forgot: %v", err)
	}
	if _, err := os.Stat(filepath.Join(state, "identity.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the identity survived leave: %v", err)
	}
}

func TestJoinSaysWhatWentWrong(t *testing.T) {
	ctx := context.Background()
	url, _, _ := master(t)
	opts := joinagent.Options{Master: url, StateDir: t.TempDir(), Key: "gwk_000000000000_" + strings.Repeat("0", 64), Hostname: "box", Version: "1.2.3", Tunnel: &fakeTunnel{},
		DetectGPUs: func(context.Context) ([]gpus.GPU, error) { return nil, nil }}
	_, err := joinagent.Join(ctx, opts)
	var me *joinagent.MasterError
	if !errors.As(err, &me) || me.Status != 401 || me.Step != "validate" {
		t.Errorf("a bad key: %v", err)
	}
	opts.Key = mintKey(t, url)
	opts.Version = "2.0.0"
	if _, err := joinagent.Join(ctx, opts); !errors.As(err, &me) || me.Status != 426 || !strings.Contains(err.Error(), "run the join command again") {
		t.Errorf("a major version ahead: %v", err)
	}
	opts.Version = "1.2.3"
	opts.DetectGPUs = func(context.Context) ([]gpus.GPU, error) { return nil, gpus.ErrToolFailed }
	if _, err := joinagent.Join(ctx, opts); !errors.Is(err, gpus.ErrToolFailed) || !strings.Contains(err.Error(), "detect GPUs") {
		t.Errorf("a failing nvidia-smi: %v", err)
	}
	if _, err := joinagent.LoadState(opts.StateDir, "renamed"); err == nil || !strings.Contains(err.Error(), "--leave") {
		t.Errorf("a renamed machine: %v", err)
	}
}
