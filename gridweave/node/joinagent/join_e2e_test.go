package joinagent_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"gridweave.dev/gridweave"
	"gridweave.dev/gridweave/fleet"
	"gridweave.dev/gridweave/node/gpus"
	"gridweave.dev/gridweave/node/joinagent"
	"gridweave.dev/internal/netnstest"
	"gridweave.dev/internal/wgdevice"
	"gridweave.dev/joinkeys"
	"gridweave.dev/joinkeys/memstore"
	"gridweave.dev/mesh/wgmesh"
	"gridweave.dev/rayctl/rayctltest"
)

// nsTunnel runs a tunnel's steps inside a network namespace.
type nsTunnel struct {
	ns *netnstest.Namespace
	t  joinagent.Tunnel
}

func (n nsTunnel) Up(ctx context.Context, c joinagent.TunnelConfig) error {
	return n.ns.Do(func() error { return n.t.Up(ctx, c) })
}

func (n nsTunnel) Down(ctx context.Context) error {
	return n.ns.Do(func() error { return n.t.Down(ctx) })
}

// nsRoutes programs kernel routes inside a network namespace.
type nsRoutes struct {
	ns *netnstest.Namespace
	r  fleet.Routes
}

func (n nsRoutes) Replace(ctx context.Context, p netip.Prefix) error {
	return n.ns.Do(func() error { return n.r.Replace(ctx, p) })
}

func (n nsRoutes) Delete(ctx context.Context, p netip.Prefix) error {
	return n.ns.Do(func() error { return n.r.Delete(ctx, p) })
}

// TestJoinOverARealTunnel joins a node host to a master host over real
// WireGuard: the service (in-memory ledger and cluster, its mesh a
// wgmesh-driven wireguard-go device) answers on the master host's address;
// the agent runs its whole flow from the node host (its HTTP through the
// node's network, its wireguard-go inside it). Then the master's VPN
// address answers through the tunnel; a second run keeps the address; leave
// removes the peer from the master's device and the node's device.
func TestJoinOverARealTunnel(t *testing.T) {
	if testing.Short() {
		t.Skip("network namespaces and wireguard-go; run make test")
	}
	netnstest.RequireRoot(t)
	ctx := context.Background()
	masterNS, nodeNS := netnstest.New(t, "gwem"), netnstest.New(t, "gwen")
	netnstest.Link(t, masterNS, "198.18.211.1/30", nodeNS, "198.18.211.2/30")
	dev := wgdevice.Start(t, masterNS, "gwem", 51820)
	dev.Up(t, masterNS, "198.19.211.1/24")
	wg, err := wgmesh.New(ctx, dev.Name, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer wg.Close()

	cfg := gridweave.DefaultConfig()
	cfg.AdminToken, cfg.JWTSecret, cfg.ServerVersion = adminToken, "jwt-secret-for-agent-tests-0123456789", "1.2.0"
	cfg.MasterIP, cfg.VPNCIDR, cfg.MasterVPNIP = "198.18.211.1", netip.MustParsePrefix("198.19.211.0/24"), netip.MustParseAddr("198.19.211.1")
	cfg.K3sURL, cfg.ClusterCIDR = "https://198.19.211.1:6443", netip.MustParsePrefix("198.19.212.0/22")
	pool, _ := joinkeys.NewPool(cfg.VPNCIDR, cfg.MasterVPNIP)
	kr, _ := joinkeys.New(new(memstore.Store), &joinkeys.Options{JWTSecret: []byte(cfg.JWTSecret), Pool: pool})
	cluster := rayctltest.New(t, cfg.Namespace)
	server, err := gridweave.New(ctx, cfg, gridweave.Backends{Keyring: kr, Mesh: wg, Ray: cluster.Client, Kube: cluster.Kube,
		Routes: nsRoutes{masterNS, fleet.DeviceRoutes{Interface: dev.Name}}})
	if err != nil {
		t.Fatal(err)
	}
	// The service answers on the master host's underlay address.
	var api net.Listener
	if err := masterNS.Do(func() (err error) { api, err = net.Listen("tcp", "198.18.211.1:8800"); return err }); err != nil {
		t.Fatal(err)
	}
	web := &http.Server{Handler: server.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = web.Serve(api) }()
	defer web.Close()
	// And an echo server on the master's VPN address, reached only through the tunnel.
	echoServer(t, masterNS, "198.19.211.1:7777")
	// The node's sockets live in the node host.
	nodeDial := func(ctx context.Context, network, addr string) (c net.Conn, err error) {
		err = nodeNS.Do(func() error {
			c, err = (&net.Dialer{Timeout: 3 * time.Second}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: nodeDial}}
	key := mintKeyWith(t, client, "http://198.18.211.1:8800")

	nodeDevice := &joinagent.WireGuardTunnel{Interface: netnstest.UniqueName("gwet"), Userspace: wgdevice.Binary(t)}
	tunnel := nsTunnel{nodeNS, nodeDevice}
	t.Cleanup(func() { _ = tunnel.Down(ctx) })
	opts := joinagent.Options{
		Master: "http://198.18.211.1:8800", StateDir: t.TempDir(), Key: key, Hostname: "gpu-e2e", Version: "1.2.9",
		Tunnel: tunnel, HTTPClient: client,
		DetectGPUs: func(context.Context) ([]gpus.GPU, error) {
			return []gpus.GPU{{Index: 0, Vendor: "nvidia", Name: "NVIDIA H100 80GB HBM3", MemoryMiB: 81559, UUID: "GPU-e2e"}}, nil
		},
	}
	// The k3s step registers the node with the labels validate named and
	// a pod CIDR (k3s's IPAM, not the node).
	opts.K3sAgent = func(ctx context.Context, j joinagent.K3sJoin) error {
		labels := map[string]string{}
		for _, l := range j.NodeLabels {
			k, v, _ := strings.Cut(l, "=")
			labels[k] = v
		}
		_, err := cluster.Kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: j.NodeName, Labels: labels},
			Spec: corev1.NodeSpec{PodCIDR: "198.19.212.0/24"}}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}
	started := time.Now()
	first, err := joinagent.Join(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("from the agent's start to a registered node: %s", time.Since(started).Round(time.Millisecond))
	if first.WorkerGroup == "" || first.VPNIP.String() != "198.19.211.2" {
		t.Errorf("join %+v", first)
	}
	echo := func() error { return echoFrom(nodeNS, "198.19.211.1:7777") }
	if err := eventually(echo); err != nil {
		t.Fatalf("the master's VPN address does not answer through the tunnel: %v", err)
	}
	peers, _ := wg.Peers(ctx)
	if len(peers) != 1 || !peers[0].Endpoint.IsValid() {
		t.Errorf("the master's device after the join: %+v (the node's endpoint is learnt from its handshake)", peers)
	}
	// An address of the node's pod CIDR, bound inside the node host,
	// answers from the master host: the route into the device and the
	// peer's allowed IPs carry it.
	nodeNS.IP(t, "address", "add", "198.19.212.1/32", "dev", "lo")
	echoServer(t, nodeNS, "198.19.212.1:7778")
	fromMaster := func() error { return echoFrom(masterNS, "198.19.212.1:7778") }
	if err := fromMaster(); err != nil {
		t.Fatalf("the node's pod CIDR is not reachable from the master: %v", err)
	}

	// Running the command again changes nothing: the node keeps its
	// session with the master (no new handshake), and traffic flows at once.
	handshake := lastHandshake(t, nodeNS, nodeDevice.Interface)
	opts.Key = ""
	again, err := joinagent.Join(ctx, opts)
	if err != nil || again.VPNIP != first.VPNIP || !again.Rejoined {
		t.Fatalf("second run: %+v, %v", again, err)
	}
	if after := lastHandshake(t, nodeNS, nodeDevice.Interface); !after.Equal(handshake) {
		t.Errorf("the second run dropped the session with the master: a handshake at %v, the last was at %v", after, handshake)
	}
	if err := echo(); err != nil {
		t.Errorf("the tunnel after the second run: %v", err)
	}

	if err := joinagent.Leave(ctx, opts); err != nil {
		t.Fatal(err)
	}
	if peers, _ := wg.Peers(ctx); len(peers) != 0 {
		t.Errorf("the master's device still has %d peers after leave", len(peers))
	}
	if err := echo(); err == nil {
		t.Error("the tunnel still carries traffic after leave")
	}
	if _, err := kr.Node(ctx, "gpu-e2e"); err == nil {
		t.Error("the ledger still holds the node after leave")
	}
	if route := netnstest.Route(t, masterNS, "198.19.212.0/24"); route != "" {
		t.Errorf("the pod CIDR route survived leave: %s", route)
	}
}

// lastHandshake is the time of the node device's last handshake with its
// one peer, the master.
func lastHandshake(t *testing.T, ns *netnstest.Namespace, device string) time.Time {
	t.Helper()
	var at time.Time
	err := ns.Do(func() error {
		c, err := wgctrl.New()
		if err != nil {
			return err
		}
		defer c.Close()
		d, err := c.Device(device)
		if err != nil {
			return err
		}
		if len(d.Peers) != 1 {
			return fmt.Errorf("%s has %d peers, want the master alone", device, len(d.Peers))
		}
		at = d.Peers[0].LastHandshakeTime
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if at.IsZero() {
		t.Fatalf("%s never shook hands with the master", device)
	}
	return at
}
