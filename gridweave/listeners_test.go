package gridweave_test

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"gridweave.dev/gridweave"
	"gridweave.dev/gridweave/fleet"
	"gridweave.dev/wgkey"
)

// TestVPNListenerServesTheTunnelRoutes: validate tells a node where the
// master answers through the tunnel; that listener serves what a joined
// node and its Ray workers call (register, report-version, leave, the
// worker image, bundles) and nothing else; bundles are not served on the
// public listener at all, only there and on the internal one.
func TestVPNListenerServesTheTunnelRoutes(t *testing.T) {
	// The test's callers are on loopback: here the VPN is loopback's.
	h := newHarness(t, &harnessOptions{config: func(c *gridweave.Config) {
		c.VPNCIDR, c.MasterVPNIP = netip.MustParsePrefix("127.0.0.0/24"), netip.MustParseAddr("127.0.0.1")
		c.VPNURL = "http://127.0.0.1:8880"
		c.KubeTorchDir = t.TempDir()
	}})
	serve := func(handler http.Handler) *harness {
		srv := httptest.NewServer(handler)
		t.Cleanup(srv.Close)
		other := *h
		other.url, other.client = srv.URL, http.DefaultClient
		return &other
	}
	vpn, internal := serve(h.server.VPNHandler()), serve(h.server.InternalHandler())

	_, key := h.mint("org")
	n := newNode(t, "tunnel-box")
	v := h.want(h.validate(n, key), 200, "validate")
	if v.body["master_vpn_url"] != "http://127.0.0.1:8880" {
		t.Fatalf("validate's master_vpn_url: %v", v.body["master_vpn_url"])
	}
	vpn.want(vpn.register(n, h100s(1)), 200, "register through the tunnel")
	vpn.want(vpn.do("POST", "/v1/nodes/report-version", n.token, map[string]any{"hostname": n.hostname, "version": "1.4.3"}), 200, "report-version through the tunnel")
	vpn.want(vpn.do("GET", "/healthz", "", nil), 200, "healthz through the tunnel")
	// Nothing else: not the admin routes, not validate, not the docs.
	for _, call := range []struct{ method, path, token string }{
		{"GET", "/v1/nodes", testAdminToken},
		{"POST", "/v1/nodes/join-keys", testAdminToken},
		{"POST", "/v1/nodes/validate", ""},
		{"GET", "/openapi.json", ""},
		{"GET", "/metrics", testAdminToken},
	} {
		if r := vpn.do(call.method, call.path, call.token, nil); r.status != 404 || r.errorField("code") != "no_such_route" {
			t.Errorf("%s %s on the VPN listener: %d %s", call.method, call.path, r.status, r.raw)
		}
	}

	synced := send(t, h, "/v1/kubetorch/sync", testAdminToken, "application/gzip", codeTarGz(t, map[string]string{"train.py": "print(1)\n"}))
	if synced.status != 201 {
		t.Fatalf("sync: %d %s", synced.status, synced.raw)
	}
	id := synced.body["id"].(string)
	if url := synced.body["url"]; url != "http://127.0.0.1:8880/v1/kubetorch/bundles/"+id+".zip" {
		t.Errorf("the bundle's URL %v, want one on the VPN listener", url)
	}
	bundle := "/v1/kubetorch/bundles/" + id + ".zip"
	if r := h.do("GET", bundle, "", nil); r.status != 404 || !strings.Contains(r.errorField("message"), "VPN listener") {
		t.Errorf("a bundle on the public listener: %d %s", r.status, r.raw)
	}
	for name, l := range map[string]*harness{"VPN": vpn, "internal": internal} {
		if r := l.do("GET", bundle, "", nil); r.status != 200 || r.header.Get("Content-Type") != "application/zip" {
			t.Errorf("the bundle on the %s listener: %d", name, r.status)
		}
	}
	if strings.Contains(h.logs.String(), id) {
		t.Error("the log holds a bundle's whole id, its only secret")
	}

	vpn.want(vpn.do("POST", "/v1/nodes/leave", n.token, map[string]any{"hostname": n.hostname}), 200, "leave through the tunnel")

	// A caller outside the VPN (here: a master whose VPN is 198.18/16,
	// called from loopback) is refused before any route.
	other := newHarness(t, nil)
	srv := httptest.NewServer(other.server.VPNHandler())
	t.Cleanup(srv.Close)
	outside := *other
	outside.url, outside.client = srv.URL, http.DefaultClient
	for _, path := range []string{"/healthz", "/v1/kubetorch/bundles/" + id + ".zip"} {
		if r := outside.do("GET", path, "", nil); r.status != 403 || r.errorField("code") != "outside_vpn" {
			t.Errorf("GET %s from outside the VPN: %d %s", path, r.status, r.raw)
		}
	}
}

// Without a VPN listener (dev mode, peers in memory) validate names none
// and nodes keep the public URL.
func TestValidateWithoutAVPNListener(t *testing.T) {
	h := newHarness(t, nil)
	_, key := h.mint("org")
	v := h.want(h.validate(newNode(t, "plain-box"), key), 200, "validate")
	if _, named := v.body["master_vpn_url"]; named {
		t.Errorf("validate named a VPN listener that is not there: %v", v.body["master_vpn_url"])
	}
}

// A first join under the name of a Kubernetes Node no Gridweave join made
// (here the master's) is 409 hostname_in_cluster; validate names the mark
// the node's own Node must carry.
func TestValidateRefusesAnotherNodesName(t *testing.T) {
	h := newHarness(t, nil)
	h.foreignNode("master-1", "10.42.0.0/24")
	_, key := h.mint("org")
	r := h.validate(newNode(t, "master-1"), key)
	if r.status != 409 || r.errorField("code") != "hostname_in_cluster" || r.errorField("field") != "hostname" {
		t.Fatalf("a join as the master's Node: %d %s", r.status, r.raw)
	}
	n := newNode(t, "gpu-7")
	v := h.want(h.validate(n, key), 200, "validate")
	pub, _ := wgkey.Parse(n.public)
	if labels, _ := v.body["node_labels"].([]any); len(labels) != 1 || labels[0] != fleet.MarkLabel+"="+fleet.Mark(pub) {
		t.Errorf("node_labels %v", v.body["node_labels"])
	}
}
