package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"gridweave.dev/internal/netnstest"
	"gridweave.dev/rayctl/rayctltest"
)

// wgAllow adds prefix to the allowed IPs of peer (base64) on the
// WireGuard device iface, as a machine's owner can on its own device (the
// stand-in `wg-allow`, run as the machine).
func wgAllow(iface, peer, prefix string) error {
	key, err := wgtypes.ParseKey(peer)
	if err != nil {
		return err
	}
	_, ipn, err := net.ParseCIDR(prefix)
	if err != nil {
		return err
	}
	c, err := wgctrl.New()
	if err != nil {
		return err
	}
	defer c.Close()
	return c.ConfigureDevice(iface, wgtypes.Config{Peers: []wgtypes.PeerConfig{{PublicKey: key, UpdateOnly: true, AllowedIPs: []net.IPNet{*ipn}}}})
}

// udpCounter counts the datagrams that reach port on any address of ns.
func udpCounter(t testing.TB, ns *netnstest.Namespace, port int) *atomic.Int64 {
	t.Helper()
	var conn net.PacketConn
	if err := ns.Do(func() (err error) { conn, err = net.ListenPacket("udp", fmt.Sprintf("0.0.0.0:%d", port)); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	var n atomic.Int64
	go func() {
		buf := make([]byte, 1500)
		for {
			if _, _, err := conn.ReadFrom(buf); err != nil {
				return
			}
			n.Add(1)
		}
	}()
	return &n
}

// udpSend sends count datagrams from ns to addr, one every interval; a
// send the kernel refuses (no route) counts as sent nowhere.
func udpSend(t testing.TB, ns *netnstest.Namespace, addr string, count int, interval time.Duration) {
	t.Helper()
	_ = ns.Do(func() error {
		conn, err := net.Dial("udp", addr)
		if err != nil {
			return err
		}
		defer conn.Close()
		for i := range count {
			_, _ = conn.Write([]byte(fmt.Sprintf("datagram %d", i)))
			time.Sleep(interval)
		}
		return nil
	})
}

// TestAJoinedMachineIsNotBelieved: a machine whose Node claims a pod CIDR
// the cluster never gave it (its kubelet's own credential writes it)
// gets none of it routed, on the master or on another machine. The job
// gateway, on a bridge beside the master (a veth pair standing for the
// Docker bridge), uses the CRD and Ray proxies on the internal listener
// without a credential; a machine that routes the master's bridge address
// into its tunnel finds that listener closed to it. A machine the master
// forgets (an administrator's disconnect) drops its direct peers.
func TestAJoinedMachineIsNotBelieved(t *testing.T) {
	if testing.Short() {
		t.Skip("network namespaces, wireguard-go and the test control plane; run make test")
	}
	// The gateway's bridge: the master's end holds the internal listener
	// (INTERNAL_ADDR, as docs/deploy.md's gateway step sets it), the gateway
	// sits at the other.
	const bridgeIP, gatewayIP = "198.18.244.1", "198.18.244.2"
	gateway := netnstest.New(t, "gwgate")
	netnstest.LinkToHost(t, bridgeIP+"/30", gateway, gatewayIP+"/30")
	serve := rayctltest.NewDashboard(t, "")
	serve.DeployApp("llm", "/llm", "serve_llm:app")
	internalPort := freeTCPPort(t)
	m := startMasterOpts(t, masterOptions{args: []string{"--install-crds"},
		env: []string{fmt.Sprintf("INTERNAL_ADDR=%s:%d", bridgeIP, internalPort), "RAY_DASHBOARD_URL=" + serve.URL}})
	gatewayCall(t, gateway, "POST", fmt.Sprintf("http://%s:%d/v1/crd/jobs", bridgeIP, internalPort),
		`{"metadata":{"name":"gateway-job"},"spec":{"owner":"alice","cluster":"gridweave-cluster","entrypoint":"python train.py"}}`, 201, `"gateway-job"`)
	gatewayCall(t, gateway, "GET", fmt.Sprintf("http://%s:%d/v1/crd/jobs?owner=alice", bridgeIP, internalPort), "", 200, `"gateway-job"`)
	gatewayCall(t, gateway, "GET", fmt.Sprintf("http://%s:%d/v1/ray/serve/statuses", bridgeIP, internalPort), "", 200, `"llm"`)
	enableForwarding(t, m.device) // relayed traffic between machines goes through the master
	command := m.joinCommand()

	victim := m.newNode(20, "trust-victim", true)
	if code, stdout, stderr := victim.run(command); code != 0 {
		t.Fatalf("the victim's join: %d %s %s", code, stdout, stderr)
	}
	attacker := m.newNode(21, "trust-attacker", true)
	attacker.podCIDR = netip.MustParsePrefix("198.19.200.0/24")
	attacker.writeK3sStandIn()
	// Its join goes through (its k3s registers the Node after the
	// register, in the background) or stops at a register that sees the
	// Node (409 pod_cidr_outside_cluster); either way the master's watch
	// refuses the pod CIDR once the Node is there.
	if code, stdout, stderr := attacker.run(command); code != 0 && !strings.Contains(stderr, "pod_cidr_outside_cluster") {
		t.Fatalf("the attacker's join: %d %s %s", code, stdout, stderr)
	}
	if err := within(30*time.Second, func() error {
		_, err := m.tc.Kube.CoreV1().Nodes().Get(context.Background(), "trust-attacker", metav1.GetOptions{})
		return err
	}); err != nil {
		t.Fatalf("the attacker's Node: %v", err)
	}
	victimLinks, attackerLinks := victim.serve(), attacker.serve()
	m.waitForLinks(linkStates{"trust-victim": {"trust-attacker": "relayed"}, "trust-attacker": {"trust-victim": "relayed"}}, 60*time.Second)
	if !strings.Contains(m.logs(), "a Node's pod CIDR refused") {
		t.Error("the master's log does not say it refused the attacker's pod CIDR")
	}

	// Nothing of the claimed range is the attacker's anywhere.
	if r := m.route("198.19.200.0/24"); r != "" {
		t.Errorf("the master routes the claimed range: %q", r)
	}
	for _, p := range m.peers() {
		for _, a := range p.AllowedIPs {
			if a.String() == "198.19.200.0/24" {
				t.Errorf("the master's peer %s holds the claimed range", p.PublicKey)
			}
		}
	}
	for _, p := range victim.device() {
		for _, a := range p.AllowedIPs {
			if a.String() == "198.19.200.0/24" {
				t.Errorf("the victim's peer %x holds the claimed range", p.PublicKey[:4])
			}
		}
	}
	_, body := m.api("GET", "/v1/nodes/trust-attacker", nil)
	if pod := body["node"].(map[string]any)["pod_cidr"]; pod != nil {
		t.Errorf("the ledger gave the attacker pod CIDR %v", pod)
	}

	// The victim's packets to an address of the claimed range never reach
	// the attacker's namespace.
	attacker.ns.IP(t, "address", "add", "198.19.200.1/32", "dev", "lo")
	port := freeUDPPort(t)
	received := udpCounter(t, attacker.ns, port)
	udpSend(t, victim.ns, fmt.Sprintf("198.19.200.1:%d", port), 50, 40*time.Millisecond)
	time.Sleep(500 * time.Millisecond)
	if n := received.Load(); n != 0 {
		t.Errorf("%d of the victim's datagrams to 198.19.200.1 reached the attacker", n)
	}

	// The attacker routes the master's bridge address into its tunnel
	// (its link service stopped, so it does not put its device back) and
	// calls the internal listener there without a credential: 403.
	attackerLinks.stop()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	masterKey := m.publicKey()
	if code, _, stderr := attacker.run(fmt.Sprintf("%s=wg-allow %q gridweave0 %s %s/32 && ip route add %s/32 dev gridweave0", standInEnv, self, masterKey, bridgeIP, bridgeIP)); code != 0 {
		t.Fatalf("widening the attacker's master peer: %s", stderr)
	}
	url := fmt.Sprintf("http://%s:%d/v1/crd/jobs", bridgeIP, internalPort)
	code, out, stderr := attacker.run("curl -sS --max-time 10 -o /dev/stdout -w '\\n%{http_code}' " + url)
	if code != 0 || !strings.HasSuffix(strings.TrimSpace(out), "403") || !strings.Contains(out, "from_the_fleet") {
		t.Errorf("the internal listener through the attacker's tunnel: exit %d, %s %s", code, out, stderr)
	}
	// The master itself (the gateway's host) is answered.
	if resp, err := http.Get(fmt.Sprintf("http://%s:%d/healthz", bridgeIP, internalPort)); err != nil || resp.StatusCode != 200 {
		t.Errorf("the internal listener from the master's host: %v %v", resp, err)
	}

	// An administrator disconnects the victim: its link service, refused,
	// drops the peer it held for the attacker.
	if len(victim.device()) < 2 {
		t.Fatalf("the victim's device before the disconnect: %d peers", len(victim.device()))
	}
	if status, body := m.api("POST", "/v1/nodes/disconnect", map[string]any{"hostname": "trust-victim"}); status != 200 {
		t.Fatalf("disconnect: %d %v", status, body)
	}
	select {
	case <-victimLinks.exited:
	case <-time.After(60 * time.Second):
		t.Fatal("the victim's link service did not stop after the master forgot it")
	}
	if peers := victim.device(); len(peers) > 1 {
		t.Errorf("the forgotten victim's device keeps %d peers, want at most the master's", len(peers))
	}
}

// gatewayCall calls url from the gateway's namespace without a
// credential, as the job gateway does, and fails the test unless the
// answer has status want and a body holding has.
func gatewayCall(t *testing.T, gateway *netnstest.Namespace, method, url, body string, want int, has string) {
	t.Helper()
	err := gateway.Do(func() error {
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		got, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want || !strings.Contains(string(got), has) {
			return fmt.Errorf("%d %s", resp.StatusCode, got)
		}
		return nil
	})
	if err != nil {
		t.Errorf("the gateway's %s %s: %v, want %d with %s", method, url, err, want, has)
	}
}

// publicKey is the master's WireGuard public key, from its device.
func (m *master) publicKey() string {
	m.t.Helper()
	c, err := wgctrl.New()
	if err != nil {
		m.t.Fatal(err)
	}
	defer c.Close()
	d, err := c.Device(m.device)
	if err != nil {
		m.t.Fatal(err)
	}
	return d.PublicKey.String()
}
