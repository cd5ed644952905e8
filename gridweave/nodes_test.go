package gridweave_test

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"gridweave.dev/gridweave/fleet"
	"gridweave.dev/joinkeys"
	"gridweave.dev/joinkeys/memstore"
	"gridweave.dev/joinkeys/sqlitestore"
	"gridweave.dev/mesh/wgkey"
)

// stores runs a test once per ledger backend.
func stores(t *testing.T, test func(t *testing.T, store func(t testing.TB) joinkeys.Store)) {
	t.Run("memstore", func(t *testing.T) { test(t, func(testing.TB) joinkeys.Store { return new(memstore.Store) }) })
	t.Run("sqlitestore", func(t *testing.T) {
		test(t, func(t testing.TB) joinkeys.Store {
			s, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "ledger.db"), nil)
			if err != nil {
				t.Fatal(err)
			}
			return s
		})
	})
}

func TestJoinFlow(t *testing.T) {
	stores(t, func(t *testing.T, store func(testing.TB) joinkeys.Store) {
		ctx := context.Background()
		h := newHarness(t, &harnessOptions{store: store(t)})

		// Mint: every field present; the join command is what a person pastes.
		minted := h.want(h.do("POST", "/v1/nodes/join-keys", testAdminToken, map[string]any{"kind": "org", "org": "acme", "ttl_seconds": 3600}), 201, "mint")
		for _, f := range []string{"id", "key", "kind", "org", "expires_at", "join_command"} {
			if _, ok := minted.body[f]; !ok {
				t.Errorf("mint answer lacks %q: %s", f, minted.raw)
			}
		}
		key := minted.body["key"].(string)
		wantCmd := `d=$(mktemp -d) && curl -fsSL http://203.0.113.7:8800/join-node.sh -o "$d/join-node.sh" && sudo MASTER_IP=203.0.113.7 bash "$d/join-node.sh" ` + key
		if minted.body["join_command"] != wantCmd {
			t.Errorf("join_command\n got %q\nwant %q", minted.body["join_command"], wantCmd)
		}
		keys := h.want(h.do("GET", "/v1/nodes/join-keys", testAdminToken, nil), 200, "list keys")
		if strings.Contains(string(keys.raw), key[len(key)-20:]) {
			t.Error("the key list shows a secret")
		}

		// Validate: the VPN address is reserved and the peer added eagerly.
		gpu := newNode(t, "gpu-1")
		h.kubeNode(gpu, "10.42.1.0/24")
		v := h.want(h.validate(gpu, key), 200, "validate")
		for _, f := range []string{"vpn_ip", "master_vpn_ip", "vpn_cidr", "master_public_key", "master_endpoint", "k3s_url", "k3s_token", "node_token"} {
			if _, ok := v.body[f]; !ok {
				t.Errorf("validate answer lacks %q: %s", f, v.raw)
			}
		}
		if v.body["master_vpn_ip"] != "198.18.0.1" || v.body["vpn_cidr"] != "198.18.0.0/16" || v.body["master_endpoint"] != "203.0.113.7:51820" {
			t.Errorf("validate answer %s", v.raw)
		}
		peers, _ := h.mesh.Peers(ctx)
		if len(peers) != 1 || peers[0].PublicKey.String() != gpu.public || peers[0].AllowedIPs[0] != netip.MustParsePrefix(gpu.vpnIP+"/32") {
			t.Fatalf("peers after validate: %+v", peers)
		}

		// Register: the pod CIDR comes from Kubernetes; a GPU node lands in
		// its pool's worker group of CLUSTER_NAME, which is created.
		reg := h.want(h.register(gpu, h100s(8)), 200, "register")
		if reg.body["worker_group"] != "gpu-nvidia-nvidia-h100-80gb-hbm3-x8" {
			t.Errorf("worker_group = %v", reg.body["worker_group"])
		}
		n := reg.body["node"].(map[string]any)
		if n["status"] != "registered" || n["pod_cidr"] != "10.42.1.0/24" || len(n["gpus"].([]any)) != 8 {
			t.Errorf("registered node %v", n)
		}
		peers, _ = h.mesh.Peers(ctx)
		if len(peers) != 1 || !slices.Contains(peers[0].AllowedIPs, netip.MustParsePrefix("10.42.1.0/24")) {
			t.Errorf("the peer does not route the pod CIDR: %+v", peers)
		}
		rc, err := h.fakes.Client.GetCluster(ctx, testNamespace, "gridweave-cluster")
		if err != nil {
			t.Fatalf("the cluster was not created: %v", err)
		}
		if len(rc.Spec.WorkerGroupSpecs) != 1 || *rc.Spec.WorkerGroupSpecs[0].Replicas != 1 ||
			rc.Spec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image != "gridweave-worker:latest" ||
			rc.Spec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Resources.Limits.Name("nvidia.com/gpu", "").Value() != 8 {
			t.Errorf("worker groups %+v", rc.Spec.WorkerGroupSpecs)
		}
		kn, _ := h.fakes.Kube.CoreV1().Nodes().Get(ctx, "gpu-1", metav1.GetOptions{})
		if kn.Labels[fleet.NodePoolLabel] != "gpu-nvidia-nvidia-h100-80gb-hbm3-x8" {
			t.Errorf("node labels %v", kn.Labels)
		}
		// The same report twice changes nothing.
		before := rc.ResourceVersion
		h.want(h.register(gpu, h100s(8)), 200, "register again")
		if rc, _ = h.fakes.Client.GetCluster(ctx, testNamespace, "gridweave-cluster"); rc.ResourceVersion != before {
			t.Error("a repeated registration rewrote the cluster")
		}
		// A second machine of the same kind joins the same group.
		gpu2 := newNode(t, "gpu-2")
		h.want(h.validate(gpu2, key), 200, "validate gpu-2")
		h.want(h.register(gpu2, h100s(8)), 200, "register gpu-2")
		rc, _ = h.fakes.Client.GetCluster(ctx, testNamespace, "gridweave-cluster")
		if len(rc.Spec.WorkerGroupSpecs) != 1 || *rc.Spec.WorkerGroupSpecs[0].Replicas != 2 {
			t.Errorf("two H100x8 nodes: groups %d, replicas %d", len(rc.Spec.WorkerGroupSpecs), *rc.Spec.WorkerGroupSpecs[0].Replicas)
		}
		// A changed GPU report moves the node to another pool.
		h.want(h.register(gpu2, h100s(4)), 200, "register gpu-2 with 4 GPUs")
		rc, _ = h.fakes.Client.GetCluster(ctx, testNamespace, "gridweave-cluster")
		if len(rc.Spec.WorkerGroupSpecs) != 2 {
			t.Errorf("after a changed report: %d groups, want 2", len(rc.Spec.WorkerGroupSpecs))
		}

		// A CPU-only node gets no worker group.
		cpu := newNode(t, "cpu-1")
		h.want(h.validate(cpu, key), 200, "validate cpu")
		reg = h.want(h.register(cpu, nil), 200, "register cpu")
		if wg, ok := reg.body["worker_group"]; !ok || wg != nil {
			t.Errorf("CPU node worker_group = %v (present %v), want null", wg, ok)
		}

		// Re-validate with the node token: the same address; with the key
		// alone: refused, saying what to do.
		again := h.do("POST", "/v1/nodes/validate", "", map[string]any{"node_token": gpu.token, "hostname": "gpu-1", "public_key": gpu.public, "version": "1.5.0"})
		h.want(again, 200, "re-validate with token")
		if again.body["vpn_ip"] != gpu.vpnIP || again.body["node_token"] != gpu.token {
			t.Errorf("re-validate %s", again.raw)
		}
		keyOnly := h.want(h.do("POST", "/v1/nodes/validate", "", map[string]any{"key": key, "hostname": "gpu-1", "public_key": gpu.public, "version": "1.4.2"}), 409, "re-validate with key alone")
		if keyOnly.errorField("code") != "node_token_required" || !strings.Contains(keyOnly.errorField("message"), "disconnect") {
			t.Errorf("re-validate with the key alone: %s", keyOnly.raw)
		}
		// Another machine cannot take the hostname.
		thief := newNode(t, "gpu-1")
		taken := h.want(h.validate(thief, key), 409, "another machine, same hostname")
		if taken.errorField("code") != "hostname_taken" || strings.Contains(string(taken.raw), gpu.public) {
			t.Errorf("hostname taken: %s", taken.raw)
		}

		// Version report: ledger and Kubernetes Node annotation.
		rv := h.want(h.do("POST", "/v1/nodes/report-version", gpu.token, map[string]any{"hostname": "gpu-1", "version": "1.4.3"}), 200, "report-version")
		if rv.body["node"].(map[string]any)["version"] != "1.4.3" {
			t.Errorf("report-version %s", rv.raw)
		}
		kn, _ = h.fakes.Kube.CoreV1().Nodes().Get(ctx, "gpu-1", metav1.GetOptions{})
		if kn.Annotations[fleet.VersionAnnotation] != "1.4.3" {
			t.Errorf("node annotations %v", kn.Annotations)
		}
		h.want(h.do("POST", "/v1/nodes/report-version", gpu2.token, map[string]any{"hostname": "gpu-1", "version": "1.4.3"}), 401, "report-version with another node's token")
		h.want(h.do("POST", "/v1/nodes/report-version", testAdminToken, map[string]any{"hostname": "gpu-1", "version": "1.4.3"}), 403, "report-version with the admin token")
		h.want(h.do("POST", "/v1/nodes/leave", testAdminToken, map[string]any{"hostname": "gpu-1"}), 403, "leave with the admin token")
		// A node token with another public key: a new machine, not a re-register.
		if r := h.do("POST", "/v1/nodes/register", "", map[string]any{"node_token": gpu.token, "hostname": "gpu-1", "public_key": newNode(t, "x").public, "version": "1.4.2"}); r.status != 409 || r.errorField("code") != "public_key_mismatch" {
			t.Errorf("register with the token and another public key: %d %s", r.status, r.raw)
		}

		// Admin reads.
		list := h.want(h.do("GET", "/v1/nodes", testAdminToken, nil), 200, "list nodes")
		if got := len(list.body["nodes"].([]any)); got != 3 {
			t.Errorf("%d nodes listed, want 3", got)
		}
		one := h.want(h.do("GET", "/v1/nodes/cpu-1", testAdminToken, nil), 200, "get node")
		cpuView := one.body["node"].(map[string]any)
		for _, f := range []string{"hostname", "public_key", "vpn_ip", "org", "join_key_id", "version", "status", "gpus", "pod_cidr", "created_at", "updated_at", "registered_at", "last_seen"} {
			if _, ok := cpuView[f]; !ok {
				t.Errorf("node view lacks %q: %s", f, one.raw)
			}
		}
		h.want(h.do("GET", "/v1/nodes/nobody", testAdminToken, nil), 404, "get unknown node")

		// Disconnect: peer, group, Kubernetes Node and ledger row go; twice is fine.
		d := h.want(h.do("POST", "/v1/nodes/disconnect", testAdminToken, map[string]any{"hostname": "gpu-1"}), 200, "disconnect")
		if d.body["hostname"] != "gpu-1" || d.body["released"] != true {
			t.Errorf("disconnect %s", d.raw)
		}
		d = h.want(h.do("POST", "/v1/nodes/disconnect", testAdminToken, map[string]any{"hostname": "gpu-1"}), 200, "disconnect again")
		if d.body["released"] != false {
			t.Errorf("second disconnect %s", d.raw)
		}
		peers, _ = h.mesh.Peers(ctx)
		for _, p := range peers {
			if p.PublicKey.String() == gpu.public {
				t.Error("the peer survived the disconnect")
			}
		}
		if _, err := h.fakes.Kube.CoreV1().Nodes().Get(ctx, "gpu-1", metav1.GetOptions{}); err == nil {
			t.Error("the Kubernetes Node survived the disconnect")
		}
		rc, _ = h.fakes.Client.GetCluster(ctx, testNamespace, "gridweave-cluster")
		for _, g := range rc.Spec.WorkerGroupSpecs {
			if g.GroupName == "gpu-nvidia-nvidia-h100-80gb-hbm3-x8" {
				t.Errorf("the last H100x8 node left but its group stayed: %+v", g)
			}
		}
		// The hostname is free for a new machine.
		h.want(h.validate(thief, key), 200, "a new machine takes the freed hostname")

		// A node leaves by itself with its token.
		l := h.want(h.do("POST", "/v1/nodes/leave", cpu.token, map[string]any{"hostname": "cpu-1"}), 200, "leave")
		if l.body["released"] != true {
			t.Errorf("leave %s", l.raw)
		}
		// Credentials first, the same answer either way: the gone node's
		// token and a made-up hostname are both 401, so a stranger learns
		// nothing of which hostnames exist.
		retry := h.want(h.do("POST", "/v1/nodes/leave", cpu.token, map[string]any{"hostname": "cpu-1"}), 401, "leave again (a retry after a lost answer)")
		stranger := h.want(h.do("POST", "/v1/nodes/leave", "gwn_made-up", map[string]any{"hostname": "nobody-here"}), 401, "a stranger's leave of an unknown hostname")
		known := h.want(h.do("POST", "/v1/nodes/leave", "gwn_made-up", map[string]any{"hostname": "gpu-2"}), 401, "a stranger's leave of a known hostname")
		if retry.errorField("code") != "invalid_node_token" || stranger.errorField("code") != known.errorField("code") || stranger.errorField("message") != known.errorField("message") {
			t.Errorf("leave answers tell hostnames apart: %s / %s / %s", retry.raw, stranger.raw, known.raw)
		}
	})
}

func TestMintVariants(t *testing.T) {
	stores(t, func(t *testing.T, store func(testing.TB) joinkeys.Store) {
		h := newHarness(t, &harnessOptions{store: store(t)})
		p := h.want(h.do("POST", "/v1/nodes/join-keys", testAdminToken, map[string]any{"kind": "provider", "org": "lambda", "ttl_seconds": 60}), 201, "provider key")
		if p.body["provider"] != "lambda" || strings.Count(p.body["key"].(string), ".") != 2 {
			t.Errorf("a provider key's provider defaults to its org: %s", p.raw)
		}
		o := h.want(h.do("POST", "/v1/nodes/join-keys", testAdminToken, map[string]any{"kind": "org", "org": "acme", "ttl_seconds": 60, "max_uses": 2, "labels": map[string]string{"team": "ml"}}), 201, "org key")
		if v, ok := o.body["provider"]; !ok || v != nil {
			t.Errorf("an org key's provider is null: %s", o.raw)
		}
		id := o.body["id"].(string)
		rev := h.want(h.do("DELETE", "/v1/nodes/join-keys/"+id, testAdminToken, nil), 200, "revoke")
		if rev.body["revoked"] != true {
			t.Errorf("revoke %s", rev.raw)
		}
		h.want(h.do("DELETE", "/v1/nodes/join-keys/ffffffffffff", testAdminToken, nil), 404, "revoke unknown")
		h.want(h.validate(newNode(t, "late"), o.body["key"].(string)), 401, "validate with a revoked key")
	})
}

func TestVersionGate(t *testing.T) {
	stores(t, func(t *testing.T, store func(testing.TB) joinkeys.Store) {
		h := newHarness(t, &harnessOptions{store: store(t)}) // server 1.4.0
		_, key := h.mint("org")
		for _, v := range []string{"1.0.0", "1.9.3", "v1.4.0-rc.1"} {
			h.want(h.do("POST", "/v1/nodes/validate", "", map[string]any{"key": key, "hostname": "ok-" + strings.NewReplacer(".", "-", "+", "-").Replace(strings.TrimPrefix(v, "v")), "public_key": newNode(t, "x").public, "version": v}), 200, "minor/patch "+v)
		}
		ahead := newNode(t, "ahead")
		r := h.want(h.do("POST", "/v1/nodes/validate", "", map[string]any{"key": key, "hostname": "ahead", "public_key": ahead.public, "version": "2.0.0"}), 426, "major ahead")
		if r.errorField("code") != "version_mismatch" || r.header.Get("Upgrade") == "" || !strings.Contains(r.errorField("message"), "run the join command again") ||
			r.errorField("server_version") != "1.4.0" || r.errorField("min_version") != "1.0.0" {
			t.Errorf("426 answer %s, Upgrade %q", r.raw, r.header.Get("Upgrade"))
		}
		peers, _ := h.mesh.Peers(context.Background())
		for _, p := range peers {
			if p.PublicKey.String() == ahead.public {
				t.Error("a refused version got a peer")
			}
		}
		if _, err := h.kr.Node(context.Background(), "ahead"); err == nil {
			t.Error("a refused version got a reservation")
		}
		h.want(h.do("POST", "/v1/nodes/validate", "", map[string]any{"key": key, "hostname": "behind", "public_key": newNode(t, "x").public, "version": "0.9.0"}), 426, "major behind")
	})
}

// TestMeshRefusalUndoesTheReservation: no ledger row without a peer.
func TestMeshRefusalUndoesTheReservation(t *testing.T) {
	_, pub, _ := wgkey.GeneratePair()
	m := newRefusingMesh(pub)
	h := newHarness(t, &harnessOptions{mesh: m})
	// A one-use key: the refused join gives its use back too.
	r := h.want(h.do("POST", "/v1/nodes/join-keys", testAdminToken, map[string]any{"kind": "org", "org": "acme", "ttl_seconds": 600, "max_uses": 1}), 201, "a one-use key")
	key := r.body["key"].(string)
	n := newNode(t, "refused")
	m.refuse.Store(true)
	r = h.validate(n, key)
	if r.status < 400 {
		t.Fatalf("validate with a refusing mesh: %d %s", r.status, r.raw)
	}
	if _, err := h.kr.Node(context.Background(), "refused"); err == nil {
		t.Fatal("the reservation stayed although the mesh refused the peer")
	}
	m.refuse.Store(false)
	h.want(h.validate(n, key), 200, "validate once the mesh accepts")
}

func TestManyNodesDistinctAddresses(t *testing.T) {
	h := newHarness(t, nil)
	_, key := h.mint("org")
	seen := map[string]string{}
	for i := range 40 {
		n := newNode(t, fmt.Sprintf("n%02d", i))
		h.want(h.validate(n, key), 200, "validate")
		if other, dup := seen[n.vpnIP]; dup {
			t.Fatalf("%s given to %s and %s", n.vpnIP, other, n.hostname)
		}
		seen[n.vpnIP] = n.hostname
	}
}

// TestListsPage: GET /v1/nodes and GET /v1/nodes/join-keys answer a page
// at a time (limit, continue), in a stable order, and the pages add up to
// the whole list; a bad limit or token is 400 naming it.
func TestListsPage(t *testing.T) {
	h := newHarness(t, nil)
	_, key := h.mint("org")
	for _, name := range []string{"page-c", "page-a", "page-e", "page-b", "page-d"} {
		h.want(h.validate(newNode(t, name), key), 200, "validate "+name)
	}
	for range 4 {
		h.mint("org")
	}
	walk := func(path, field, id string) []string {
		var got []string
		token := ""
		for pages := 0; pages < 10; pages++ {
			url := path + "?limit=2"
			if token != "" {
				url += "&continue=" + token
			}
			r := h.want(h.do("GET", url, testAdminToken, nil), 200, "page of "+path)
			items := r.body[field].([]any)
			if len(items) > 2 {
				t.Fatalf("%s: a page of %d with limit 2", path, len(items))
			}
			for _, it := range items {
				got = append(got, it.(map[string]any)[id].(string))
			}
			token, _ = r.body["continue"].(string)
			if token == "" {
				return got
			}
		}
		t.Fatalf("%s: no last page", path)
		return nil
	}
	if got := strings.Join(walk("/v1/nodes", "nodes", "hostname"), " "); got != "page-a page-b page-c page-d page-e" {
		t.Errorf("nodes in pages: %s", got)
	}
	whole := h.want(h.do("GET", "/v1/nodes/join-keys", testAdminToken, nil), 200, "all keys")
	var want []string
	for _, k := range whole.body["keys"].([]any) {
		want = append(want, k.(map[string]any)["id"].(string))
	}
	if got := walk("/v1/nodes/join-keys", "keys", "id"); strings.Join(got, " ") != strings.Join(want, " ") || len(got) != 5 {
		t.Errorf("keys in pages %v, want %v", got, want)
	}
	for _, q := range []struct{ query, field string }{{"limit=0", "limit"}, {"limit=501", "limit"}, {"limit=x", "limit"}, {"continue=!!!", "continue"}} {
		for _, path := range []string{"/v1/nodes", "/v1/nodes/join-keys"} {
			if r := h.do("GET", path+"?"+q.query, testAdminToken, nil); r.status != 400 || r.errorField("field") != q.field {
				t.Errorf("%s?%s: %d %s; want 400 naming %s", path, q.query, r.status, r.raw, q.field)
			}
		}
	}
	if r := h.do("GET", "/v1/nodes/join-keys?continue=bm9uZQ", testAdminToken, nil); r.status != 400 || r.errorField("field") != "continue" {
		t.Errorf("a key token that names no key: %d %s", r.status, r.raw)
	}
}
