package gridweave_test

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"gridweave.dev/gridweave"
	"gridweave.dev/gridweave/fleet"
	"gridweave.dev/mesh/wgkey"
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
	if r := vpn.do("GET", bundle, "", nil); r.status != 200 || r.header.Get("Content-Type") != "application/zip" {
		t.Errorf("the bundle on the VPN listener: %d", r.status)
	}
	// The internal listener answers no caller of the VPN (here every
	// caller: the VPN is loopback's), whatever it asks.
	for _, path := range []string{bundle, "/v1/crd/jobs", "/metrics"} {
		if r := internal.do("GET", path, "", nil); r.status != 403 || r.errorField("code") != "from_the_fleet" {
			t.Errorf("GET %s on the internal listener from inside the VPN: %d %s", path, r.status, r.raw)
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
	if labels, _ := v.body["node_labels"].([]any); len(labels) != 1 || labels[0] != fleet.MarkLabel+"="+markOf(t, n)[fleet.MarkLabel] {
		t.Errorf("node_labels %v", v.body["node_labels"])
	}
	// The mark is no function of what every machine sees (the public key):
	// it is not the SHA-256 of the key that marks were once.
	pub, _ := wgkey.Parse(n.public)
	sum := sha256.Sum256(pub[:])
	if labels, _ := v.body["node_labels"].([]any); len(labels) == 1 && labels[0] == fleet.MarkLabel+"="+hex.EncodeToString(sum[:20]) {
		t.Errorf("the mark is the public key's SHA-256, which every machine can compute: %v", labels)
	}
}

// The worker image and k3s are served through the tunnels only once the
// master has a VPN listener: 404 through_the_tunnel on the public one,
// whatever the Range; the VPN listener serves them.
func TestLargeDownloadsOnlyThroughTheTunnel(t *testing.T) {
	dir := t.TempDir()
	image, k3s := filepath.Join(dir, "worker.tar"), filepath.Join(dir, "k3s")
	if err := os.WriteFile(image, []byte("an image tarball"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(k3s, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	platform := runtime.GOOS + "/" + runtime.GOARCH
	paths := []string{"/v1/nodes/worker-image", "/v1/nodes/worker-image/sha256", "/v1/nodes/agent/" + platform + "/k3s", "/v1/nodes/agent/" + platform + "/k3s/sha256"}
	// Without a VPN listener (dev mode, peers in memory) there is no other
	// way to fetch them: the public listener serves them.
	open := newHarness(t, &harnessOptions{config: func(c *gridweave.Config) { c.WorkerImageTar, c.K3sBinary = image, k3s }})
	for _, p := range paths {
		if r := open.do("GET", p, "", nil); r.status != 200 {
			t.Errorf("GET %s without a VPN listener: %d %s", p, r.status, r.raw)
		}
	}
	h := newHarness(t, &harnessOptions{config: func(c *gridweave.Config) {
		c.VPNCIDR, c.MasterVPNIP = netip.MustParsePrefix("127.0.0.0/24"), netip.MustParseAddr("127.0.0.1")
		c.VPNURL = "http://127.0.0.1:8880"
		c.WorkerImageTar, c.K3sBinary = image, k3s
	}})
	srv := httptest.NewServer(h.server.VPNHandler())
	t.Cleanup(srv.Close)
	vpn := *h
	vpn.url, vpn.client = srv.URL, http.DefaultClient
	for _, p := range paths {
		req, _ := http.NewRequest("GET", h.url+p, nil)
		req.Header.Set("Range", "bytes=0-3")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 404 || !strings.Contains(string(body), "through_the_tunnel") {
			t.Errorf("GET %s on the public listener: %d %s", p, resp.StatusCode, body)
		}
		if r := vpn.do("GET", p, "", nil); r.status != 200 {
			t.Errorf("GET %s through the tunnel: %d %s", p, r.status, r.raw)
		}
	}
}

// The internal listener answers a caller outside the fleet (here the
// gateway on loopback, with the VPN elsewhere) without credentials.
func TestInternalListenerAnswersTheGateway(t *testing.T) {
	h := newHarness(t, nil)
	srv := httptest.NewServer(h.server.InternalHandler())
	t.Cleanup(srv.Close)
	if resp, err := http.Get(srv.URL + "/healthz"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("the internal listener from loopback: %v %v", resp, err)
	}
}
