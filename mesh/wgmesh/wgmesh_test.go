package wgmesh_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"gridweave.dev/internal/netnstest"
	"gridweave.dev/internal/wgdevice"
	"gridweave.dev/mesh"
	"gridweave.dev/mesh/meshtest"
	"gridweave.dev/mesh/wgmesh"
)

func skipShort(t testing.TB) {
	if testing.Short() {
		t.Skip("real wireguard-go device in a network namespace; run make test")
	}
}

// newDevice starts a wireguard-go device in a fresh namespace.
func newDevice(t testing.TB) *wgdevice.Device {
	ns := netnstest.New(t, "gwm")
	return wgdevice.Start(t, ns, "wgm", 0)
}

func TestConformanceOnWireguardGo(t *testing.T) {
	skipShort(t)
	open := func(t *testing.T) mesh.Mesh {
		dev := newDevice(t)
		m, err := wgmesh.New(context.Background(), dev.Name, nil)
		if err != nil {
			t.Fatal(err)
		}
		if pub, _ := m.PublicKey(context.Background()); pub != dev.PublicKey {
			t.Fatalf("PublicKey = %s, device has %s", pub, dev.PublicKey)
		}
		return m
	}
	meshtest.Run(t, open)
	meshtest.RunObserver(t, open)
}

// recorder is a wgmesh.Client that keeps every configuration sent and
// counts the device reads.
type recorder struct {
	wgmesh.Client
	mu    sync.Mutex
	sent  []wgtypes.Config
	reads int
}

func (r *recorder) Device(name string) (*wgtypes.Device, error) {
	r.mu.Lock()
	r.reads++
	r.mu.Unlock()
	return r.Client.Device(name)
}

func (r *recorder) ConfigureDevice(name string, cfg wgtypes.Config) error {
	r.mu.Lock()
	r.sent = append(r.sent, cfg)
	r.mu.Unlock()
	return r.Client.ConfigureDevice(name, cfg)
}

func (r *recorder) take() []wgtypes.Config {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.sent
	r.sent = nil
	return out
}

func TestProgramsDifferencesOnly(t *testing.T) {
	skipShort(t)
	ctx := context.Background()
	dev := newDevice(t)
	client, err := wgctrl.New()
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	rec := &recorder{Client: client}
	// No periodic read during the test: every read counted below would
	// come from the calls themselves.
	m, err := wgmesh.New(ctx, dev.Name, &wgmesh.Options{Client: rec, ResyncInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	key := meshtest.NewKey(t)
	peer := mesh.Peer{PublicKey: key, AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.19.0.2/32")}, Endpoint: netip.MustParseAddrPort("198.18.0.2:51820")}
	// Another peer exists throughout: a diff must never touch it.
	other := mesh.Peer{PublicKey: meshtest.NewKey(t), AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.19.0.3/32")}}
	for _, p := range []mesh.Peer{other, peer} {
		if err := m.UpsertPeer(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	check := func(step string, want int, inspect func(wgtypes.PeerConfig)) {
		t.Helper()
		sent := rec.take()
		if len(sent) != want {
			t.Fatalf("%s: %d ConfigureDevice calls, want %d", step, len(sent), want)
		}
		for _, cfg := range sent {
			if cfg.ReplacePeers || cfg.PrivateKey != nil || cfg.ListenPort != nil {
				t.Fatalf("%s: sent device-wide settings %+v", step, cfg)
			}
			if len(cfg.Peers) != 1 || cfg.Peers[0].PublicKey != wgtypes.Key(key) {
				t.Fatalf("%s: sent %d peers (%v), want only the one changed", step, len(cfg.Peers), cfg.Peers)
			}
			inspect(cfg.Peers[0])
		}
	}
	rec.take()
	rec.mu.Lock()
	rec.reads = 0
	rec.mu.Unlock()

	if err := m.UpsertPeer(ctx, peer); err != nil {
		t.Fatal(err)
	}
	check("identical upsert", 0, nil)

	peer.PersistentKeepalive = 25 * time.Second
	if err := m.UpsertPeer(ctx, peer); err != nil {
		t.Fatal(err)
	}
	check("keepalive change", 1, func(pc wgtypes.PeerConfig) {
		if pc.ReplaceAllowedIPs || pc.Endpoint != nil || pc.PersistentKeepaliveInterval == nil || !pc.UpdateOnly {
			t.Fatalf("keepalive change sent %+v", pc)
		}
	})

	peer.AllowedIPs = append(peer.AllowedIPs, netip.MustParsePrefix("198.18.64.0/24"))
	if err := m.UpsertPeer(ctx, peer); err != nil {
		t.Fatal(err)
	}
	check("allowed IPs change", 1, func(pc wgtypes.PeerConfig) {
		if !pc.ReplaceAllowedIPs || len(pc.AllowedIPs) != 2 || pc.Endpoint != nil || pc.PersistentKeepaliveInterval != nil {
			t.Fatalf("allowed-IP change sent %+v", pc)
		}
	})

	if err := m.RemovePeer(ctx, key); err != nil {
		t.Fatal(err)
	}
	check("remove", 1, func(pc wgtypes.PeerConfig) {
		if !pc.Remove {
			t.Fatalf("remove sent %+v", pc)
		}
	})
	// Checking the device for a restart must not cost a read of all its
	// peers per call.
	if rec.reads != 0 {
		t.Fatalf("the calls read the whole device %d times, want 0", rec.reads)
	}
	d, err := client.Device(dev.Name)
	if err != nil || len(d.Peers) != 1 || d.Peers[0].PublicKey != wgtypes.Key(other.PublicKey) {
		t.Fatalf("device peers after the changes: %+v, %v", d, err)
	}
}

// TestTunnelCarriesTrafficAndFollowsPeers builds two hosts (network
// namespaces joined by a veth pair), runs wireguard-go in each, configures
// both through wgmesh, and sends TCP traffic across the tunnel; after
// RemovePeer it stops, after UpsertPeer it flows again.
func TestTunnelCarriesTrafficAndFollowsPeers(t *testing.T) {
	skipShort(t)
	ctx := context.Background()
	hostA, hostB := netnstest.New(t, "gwa"), netnstest.New(t, "gwb")
	netnstest.Link(t, hostA, "198.18.100.1/30", hostB, "198.18.100.2/30")
	devA := wgdevice.Start(t, hostA, "wga", 51820)
	devB := wgdevice.Start(t, hostB, "wgb", 51820)
	devA.Up(t, hostA, "198.19.100.1/24")
	devB.Up(t, hostB, "198.19.100.2/24")

	meshA, err := wgmesh.New(ctx, devA.Name, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer meshA.Close()
	meshB, err := wgmesh.New(ctx, devB.Name, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer meshB.Close()
	peerB := mesh.Peer{PublicKey: devB.PublicKey, AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.19.100.2/32")}, Endpoint: netip.MustParseAddrPort("198.18.100.2:51820")}
	peerA := mesh.Peer{PublicKey: devA.PublicKey, AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.19.100.1/32")}, Endpoint: netip.MustParseAddrPort("198.18.100.1:51820")}
	for _, step := range []struct {
		m mesh.Mesh
		p mesh.Peer
	}{{meshA, peerB}, {meshB, peerA}} {
		if err := step.m.UpsertPeer(ctx, step.p); err != nil {
			t.Fatal(err)
		}
	}

	// An echo server on host B's tunnel address.
	var ln net.Listener
	if err := hostB.Do(func() (err error) {
		ln, err = net.Listen("tcp", "198.19.100.2:7777")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	// echo sends a line from host A through the tunnel and reads it back.
	echo := func(timeout time.Duration) error {
		return hostA.Do(func() error {
			c, err := net.DialTimeout("tcp", "198.19.100.2:7777", timeout)
			if err != nil {
				return err
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(timeout))
			msg := []byte("across the tunnel\n")
			if _, err := c.Write(msg); err != nil {
				return err
			}
			got := make([]byte, len(msg))
			if _, err := io.ReadFull(c, got); err != nil {
				return err
			}
			if string(got) != string(msg) {
				return fmt.Errorf("echo returned %q", got)
			}
			return nil
		})
	}
	// eventually retries echo for a bounded time (the first packet waits
	// for a handshake).
	eventually := func(what string) {
		t.Helper()
		var err error
		for range 10 {
			if err = echo(2 * time.Second); err == nil {
				return
			}
		}
		t.Fatalf("%s: traffic does not cross the tunnel: %v", what, err)
	}

	eventually("after both peers were added")
	// What B's device observed of A: where its packets came from, the
	// handshake, the bytes.
	statuses, err := meshB.PeerStatuses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(statuses) != 1 || statuses[0].PublicKey != devA.PublicKey || statuses[0].Endpoint != peerA.Endpoint ||
		time.Since(statuses[0].LastHandshake) > time.Minute || statuses[0].RxBytes == 0 || statuses[0].TxBytes == 0 {
		t.Errorf("B's device observed %+v of A", statuses)
	}
	if err := meshA.RemovePeer(ctx, devB.PublicKey); err != nil {
		t.Fatal(err)
	}
	if err := echo(time.Second); err == nil {
		t.Fatal("traffic still crosses the tunnel after RemovePeer")
	}
	if err := meshA.UpsertPeer(ctx, peerB); err != nil {
		t.Fatal(err)
	}
	eventually("after the peer was upserted again")
	if _, err := meshA.Peers(ctx); err != nil {
		t.Fatal(err)
	}
	if err := meshA.RemovePeer(ctx, devB.PublicKey); err != nil || errors.Is(meshA.RemovePeer(ctx, devB.PublicKey), mesh.ErrPeerNotFound) == false {
		t.Fatalf("remove twice: %v", err)
	}
}

// devicePeers reads the peers the device holds, bypassing the Mesh.
func devicePeers(t *testing.T, client *wgctrl.Client, name string) map[wgtypes.Key]wgtypes.Peer {
	t.Helper()
	d, err := client.Device(name)
	if err != nil {
		t.Fatal(err)
	}
	out := map[wgtypes.Key]wgtypes.Peer{}
	for _, p := range d.Peers {
		out[p.PublicKey] = p
	}
	return out
}

// expectOnDevice checks that the device holds exactly the given peers with
// their allowed IPs, endpoint and keepalive.
func expectOnDevice(t *testing.T, client *wgctrl.Client, name string, want ...mesh.Peer) {
	t.Helper()
	got := devicePeers(t, client, name)
	if len(got) != len(want) {
		t.Fatalf("device holds %d peers, want %d", len(got), len(want))
	}
	for _, w := range want {
		g, ok := got[wgtypes.Key(w.PublicKey)]
		if !ok {
			t.Fatalf("device lacks peer %s", w.PublicKey)
		}
		var ips []string
		for _, ipn := range g.AllowedIPs {
			ips = append(ips, ipn.String())
		}
		var wantIPs []string
		for _, p := range w.AllowedIPs {
			wantIPs = append(wantIPs, p.String())
		}
		var endpoint netip.AddrPort
		if g.Endpoint != nil {
			endpoint = g.Endpoint.AddrPort()
			endpoint = netip.AddrPortFrom(endpoint.Addr().Unmap(), endpoint.Port())
		}
		if fmt.Sprint(ips) != fmt.Sprint(wantIPs) || endpoint != w.Endpoint || g.PersistentKeepaliveInterval != w.PersistentKeepalive {
			t.Fatalf("device holds peer %s as ips %v endpoint %v keepalive %v; want %v %v %v",
				w.PublicKey, ips, endpoint, g.PersistentKeepaliveInterval, wantIPs, w.Endpoint, w.PersistentKeepalive)
		}
	}
}

// TestRepairsAfterDeviceRestart restarts wireguard-go under a running Mesh.
// The restarted device has the same key but no peers; the next upsert, the
// same as one made before the restart, must program that peer again and
// bring back the others the Mesh had programmed.
func TestRepairsAfterDeviceRestart(t *testing.T) {
	skipShort(t)
	ctx := context.Background()
	dev := newDevice(t)
	client, err := wgctrl.New()
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	var logs bytes.Buffer
	m, err := wgmesh.New(ctx, dev.Name, &wgmesh.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	joining := mesh.Peer{
		PublicKey:           meshtest.NewKey(t),
		AllowedIPs:          []netip.Prefix{netip.MustParsePrefix("198.18.64.0/24"), netip.MustParsePrefix("198.19.0.2/32")},
		Endpoint:            netip.MustParseAddrPort("198.18.0.2:51820"),
		PersistentKeepalive: 25 * time.Second,
	}
	settled := mesh.Peer{PublicKey: meshtest.NewKey(t), AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.19.0.3/32")}}
	for _, p := range []mesh.Peer{joining, settled} {
		if err := m.UpsertPeer(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	expectOnDevice(t, client, dev.Name, joining, settled)

	dev.Restart(t)
	expectOnDevice(t, client, dev.Name) // the restart dropped every peer

	if err := m.UpsertPeer(ctx, joining); err != nil {
		t.Fatal(err)
	}
	expectOnDevice(t, client, dev.Name, joining, settled)
	if pub, err := m.PublicKey(ctx); err != nil || pub != dev.PublicKey {
		t.Fatalf("PublicKey after the restart = %s, %v; want %s", pub, err, dev.PublicKey)
	}

	// A second restart is repaired by a removal just as well.
	dev.Restart(t)
	if err := m.RemovePeer(ctx, settled.PublicKey); err != nil {
		t.Fatal(err)
	}
	expectOnDevice(t, client, dev.Name, joining)

	if !strings.Contains(logs.String(), "restored=2") || strings.Contains(logs.String(), dev.PrivateKey.Base64()) {
		t.Fatalf("logs do not report the restore, or show the private key:\n%s", logs.String())
	}
}

// TestTakesOnChangesMadeBySomeoneElse changes a running device behind the
// Mesh's back, as `wg set` would: one peer removed, another's allowed IPs
// moved. Once the cache is re-read (after ResyncInterval, or by Resync),
// the next upserts, the same as before, put both peers back.
func TestTakesOnChangesMadeBySomeoneElse(t *testing.T) {
	skipShort(t)
	for _, tc := range []struct {
		name     string
		interval time.Duration
		resync   bool
	}{
		{"ResyncIntervalElapsed", time.Nanosecond, false},
		{"ResyncCalled", -1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dev := newDevice(t)
			client, err := wgctrl.New()
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			m, err := wgmesh.New(ctx, dev.Name, &wgmesh.Options{ResyncInterval: tc.interval})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			removed := mesh.Peer{PublicKey: meshtest.NewKey(t), AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.19.0.2/32")}}
			moved := mesh.Peer{PublicKey: meshtest.NewKey(t), AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.19.0.3/32")}}
			for _, p := range []mesh.Peer{removed, moved} {
				if err := m.UpsertPeer(ctx, p); err != nil {
					t.Fatal(err)
				}
			}
			err = client.ConfigureDevice(dev.Name, wgtypes.Config{Peers: []wgtypes.PeerConfig{
				{PublicKey: wgtypes.Key(removed.PublicKey), Remove: true},
				{PublicKey: wgtypes.Key(moved.PublicKey), UpdateOnly: true, ReplaceAllowedIPs: true, AllowedIPs: toNets([]netip.Prefix{netip.MustParsePrefix("198.19.9.9/32")})},
			}})
			if err != nil {
				t.Fatal(err)
			}
			if tc.resync {
				if err := m.Resync(ctx); err != nil {
					t.Fatal(err)
				}
			}
			for _, p := range []mesh.Peer{removed, moved} {
				if err := m.UpsertPeer(ctx, p); err != nil {
					t.Fatal(err)
				}
			}
			expectOnDevice(t, client, dev.Name, removed, moved)
		})
	}
}
