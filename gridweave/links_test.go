package gridweave_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gridweave.dev/gridweave"
	"gridweave.dev/gridweave/api"
	"gridweave.dev/joinkeys"
	"gridweave.dev/mesh"
	"gridweave.dev/mesh/memmesh"
	"gridweave.dev/mesh/wgkey"
)

// directoryOf decodes a peer directory answer.
func directoryOf(t *testing.T, r reply) api.PeerDirectory {
	t.Helper()
	var d api.PeerDirectory
	if err := json.Unmarshal(r.raw, &d); err != nil {
		t.Fatalf("peers: %v: %s", err, r.raw)
	}
	return d
}

func peerNamed(d api.PeerDirectory, hostname string) (api.DirectoryPeer, bool) {
	i := slices.IndexFunc(d.Peers, func(p api.DirectoryPeer) bool { return p.Hostname == hostname })
	if i < 0 {
		return api.DirectoryPeer{}, false
	}
	return d.Peers[i], true
}

// TestPeerDirectory: a node learns the other nodes (key, VPN address,
// endpoints: the one the master's device sees, then the ones the node
// reported) from the directory; a long poll answers at the next change; a
// node that leaves is gone from the next answer; only a node's own token
// reads it.
func TestPeerDirectory(t *testing.T) {
	t.Parallel() // it waits on long polls: beside the others
	h := newHarness(t, nil)
	_, key := h.mint("org")
	a, b := newNode(t, "gpu-a"), newNode(t, "gpu-b")
	for _, n := range []*node{a, b} {
		h.want(h.validate(n, key), 200, "validate "+n.hostname)
		h.want(h.register(n, h100s(1)), 200, "register "+n.hostname)
	}
	pubA, _ := wgkey.Parse(a.public)
	seen := netip.MustParseAddrPort("203.0.113.10:51820")
	if err := h.mesh.(*memmesh.Mesh).SetStatus(mesh.PeerStatus{PublicKey: pubA, Endpoint: seen, LastHandshake: time.Now()}); err != nil {
		t.Fatal(err)
	}

	h.want(h.do("GET", "/v1/nodes/peers?hostname=gpu-a", "", nil), 401, "peers without a credential")
	h.want(h.do("GET", "/v1/nodes/peers?hostname=gpu-a", b.token, nil), 401, "peers with another node's token")
	h.want(h.do("GET", "/v1/nodes/peers?hostname=gpu-a", testAdminToken, nil), 403, "peers with the admin token")
	if r := h.want(h.do("GET", "/v1/nodes/peers?hostname=gpu-a&wait=61", a.token, nil), 400, "a wait too long"); r.errorField("field") != "wait" {
		t.Errorf("the error names %q, not wait: %s", r.errorField("field"), r.raw)
	}
	// Seconds that overflow a duration are too long too, not a wait of
	// no time or a negative one.
	for _, wait := range []string{"9223372037", "18446744074"} {
		if r := h.want(h.do("GET", "/v1/nodes/peers?hostname=gpu-a&wait="+wait, a.token, nil), 400, "a wait of "+wait+" s"); r.errorField("field") != "wait" {
			t.Errorf("wait=%s: %s", wait, r.raw)
		}
	}

	first := directoryOf(t, h.want(h.do("GET", "/v1/nodes/peers?hostname=gpu-b", b.token, nil), 200, "peers"))
	pa, ok := peerNamed(first, "gpu-a")
	if !ok || len(first.Peers) != 2 || first.Revision == "" {
		t.Fatalf("the directory holds %+v", first)
	}
	if pa.PublicKey != a.public || pa.VPNIP != a.vpnIP || !slices.Equal(pa.Endpoints, []string{seen.String()}) {
		t.Errorf("gpu-a in the directory: %+v; want key %s, address %s, endpoints [%s]", pa, a.public, a.vpnIP, seen)
	}

	// Nothing changes: the long poll answers the same revision when the
	// wait is over.
	same := directoryOf(t, h.want(h.do("GET", "/v1/nodes/peers?hostname=gpu-b&wait=1&since="+first.Revision, b.token, nil), 200, "an idle long poll"))
	if same.Revision != first.Revision {
		t.Errorf("an unchanged directory has a new revision: %s, then %s", first.Revision, same.Revision)
	}

	// A node joins while b waits: b's long poll answers with it.
	answered := make(chan reply, 1)
	go func() {
		answered <- h.do("GET", "/v1/nodes/peers?hostname=gpu-b&wait=60&since="+first.Revision, b.token, nil)
	}()
	c := newNode(t, "gpu-c")
	h.want(h.validate(c, key), 200, "validate gpu-c")
	var next api.PeerDirectory
	select {
	case r := <-answered:
		next = directoryOf(t, h.want(r, 200, "the long poll"))
	case <-time.After(50 * time.Second):
		t.Fatal("the long poll did not answer the new node")
	}
	if _, ok := peerNamed(next, "gpu-c"); !ok || next.Revision == first.Revision {
		t.Errorf("after gpu-c joined the directory is %+v (revision %s, before %s)", next.Peers, next.Revision, first.Revision)
	}

	// a reports an address of its own: it follows the one the master sees.
	// It also says how its NAT maps: the others see it.
	h.want(h.do("POST", "/v1/nodes/links", a.token, api.LinksReport{Hostname: "gpu-a", ListenPort: 51820, Endpoints: []string{"192.0.2.5:51820"}, NAT: api.NATEndpointDependent, Links: []api.Link{}}), 200, "report")
	deadline := time.Now().Add(10 * time.Second)
	for {
		d := directoryOf(t, h.want(h.do("GET", "/v1/nodes/peers?hostname=gpu-b", b.token, nil), 200, "peers"))
		if pa, _ := peerNamed(d, "gpu-a"); slices.Equal(pa.Endpoints, []string{seen.String(), "192.0.2.5:51820"}) && pa.NAT == api.NATEndpointDependent {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("gpu-a's reported endpoint is not in the directory: %+v", d.Peers)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// b leaves: it is gone from the next answer.
	h.want(h.do("POST", "/v1/nodes/leave", b.token, map[string]any{"hostname": "gpu-b"}), 200, "leave")
	for {
		d := directoryOf(t, h.want(h.do("GET", "/v1/nodes/peers?hostname=gpu-a", a.token, nil), 200, "peers"))
		if _, ok := peerNamed(d, "gpu-b"); !ok {
			break
		}
		if time.Now().After(deadline.Add(10 * time.Second)) {
			t.Fatalf("gpu-b left but is still in the directory: %+v", d.Peers)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestLinkReports: a node's report of its links shows in its links route,
// as counts on the node, and in the metrics; a bad report is a 400 naming
// the field and changes nothing.
func TestLinkReports(t *testing.T) {
	h := newHarness(t, nil)
	_, key := h.mint("org")
	a, b, c := newNode(t, "gpu-a"), newNode(t, "gpu-b"), newNode(t, "gpu-c")
	for _, n := range []*node{a, b, c} {
		h.want(h.validate(n, key), 200, "validate "+n.hostname)
	}
	r := h.want(h.do("GET", "/v1/nodes/gpu-a/links", testAdminToken, nil), 200, "links before a report")
	if r.body["reported_at"] != nil || len(r.body["links"].([]any)) != 0 {
		t.Errorf("links before a report: %s", r.raw)
	}
	h.want(h.do("GET", "/v1/nodes/gpu-a/links", a.token, nil), 401, "links with a node token")
	h.want(h.do("GET", "/v1/nodes/nobody/links", testAdminToken, nil), 404, "links of an unknown node")

	handshake := time.Date(2026, 12, 3, 6, 0, 0, 0, time.UTC)
	good := api.LinksReport{Hostname: "gpu-a", ListenPort: 51820, Links: []api.Link{
		{Hostname: "gpu-b", PublicKey: b.public, State: api.LinkDirect, Endpoint: "198.18.241.10:40000", LastHandshake: &handshake, RxBytes: 10, TxBytes: 20},
		{Hostname: "gpu-c", PublicKey: c.public, State: api.LinkRelayed, Endpoint: "198.18.241.14:40001", RelayedReason: api.RelayedSymmetricNAT},
	}, NAT: api.NATEndpointIndependent, Endpoints: []string{"192.0.2.7:51820"}}
	for _, bad := range []struct {
		field  string
		change func(*api.LinksReport)
	}{
		{"links[0].state", func(r *api.LinksReport) { r.Links[0].State = "sideways" }},
		{"links[1].public_key", func(r *api.LinksReport) { r.Links[1].PublicKey = "not a key" }},
		{"links[0].endpoint", func(r *api.LinksReport) { r.Links[0].Endpoint = "nowhere" }},
		{"links[0].hostname", func(r *api.LinksReport) { r.Links[0].Hostname = "Not_A_Host" }},
		{"listen_port", func(r *api.LinksReport) { r.ListenPort = 70000 }},
		{"endpoints[0]", func(r *api.LinksReport) { r.Endpoints = []string{"127.0.0.1:5"} }},
		{"endpoints[0]", func(r *api.LinksReport) { r.Endpoints = []string{"198.18.0.9:51820"} }}, // inside the VPN
		{"nat", func(r *api.LinksReport) { r.NAT = "full_cone" }},
		{"links[0].rx_bytes", func(r *api.LinksReport) { r.Links[0].RxBytes = -1 }},
		{"links[1].tx_bytes", func(r *api.LinksReport) { r.Links[1].TxBytes = -1 }},
		{"links", func(r *api.LinksReport) { r.Links = slices.Repeat(r.Links[:1], api.MaxLinksPerReport+1) }},
		{"links[1].relayed_reason", func(r *api.LinksReport) { r.Links[1].RelayedReason = "bad_luck" }},
		{"links[0].relayed_reason", func(r *api.LinksReport) { r.Links[0].RelayedReason = api.RelayedProbesTimedOut }}, // a direct link
	} {
		report := good
		report.Links = slices.Clone(good.Links)
		bad.change(&report)
		r := h.want(h.do("POST", "/v1/nodes/links", a.token, report), 400, "a report with a bad "+bad.field)
		if r.errorField("field") != bad.field {
			t.Errorf("a bad %s: the error names %q: %s", bad.field, r.errorField("field"), r.raw)
		}
	}
	if r := h.want(h.do("GET", "/v1/nodes/gpu-a/links", testAdminToken, nil), 200, "links"); r.body["reported_at"] != nil {
		t.Errorf("a refused report was kept: %s", r.raw)
	}
	h.want(h.do("POST", "/v1/nodes/links", b.token, good), 401, "a report with another node's token")
	// Links to a node the directory does not hold, or to the reporter
	// itself, do not count.
	_, ghost, _ := wgkey.GeneratePair()
	withStrangers := good
	withStrangers.Links = append(slices.Clone(good.Links),
		api.Link{Hostname: "ghost", PublicKey: ghost.String(), State: api.LinkDirect},
		api.Link{Hostname: "gpu-a", PublicKey: a.public, State: api.LinkDirect},
		api.Link{Hostname: "gpu-c", PublicKey: ghost.String(), State: api.LinkDirect})
	h.want(h.do("POST", "/v1/nodes/links", a.token, withStrangers), 200, "report")
	// b's side of the pair says connecting: the pair is not yet direct.
	h.want(h.do("POST", "/v1/nodes/links", b.token, api.LinksReport{Hostname: "gpu-b", Links: []api.Link{
		{Hostname: "gpu-a", PublicKey: a.public, State: api.LinkConnecting},
	}}), 200, "b's report")

	var links api.NodeLinks
	if err := json.Unmarshal(h.want(h.do("GET", "/v1/nodes/gpu-a/links", testAdminToken, nil), 200, "links").raw, &links); err != nil {
		t.Fatal(err)
	}
	if links.ReportedAt == nil || len(links.Links) != 2 || links.Links[0].State != api.LinkDirect || !links.Links[0].LastHandshake.Equal(handshake) ||
		links.Links[1].RelayedReason != api.RelayedSymmetricNAT || links.NAT != api.NATEndpointIndependent ||
		!slices.Equal(links.Endpoints, []string{"192.0.2.7:51820"}) ||
		links.Counts.Direct != 1 || links.Counts.Relayed != 1 || links.Counts.Connecting != 0 {
		t.Errorf("gpu-a's links: %+v", links)
	}
	var list api.NodeList
	if err := json.Unmarshal(h.want(h.do("GET", "/v1/nodes", testAdminToken, nil), 200, "nodes").raw, &list); err != nil {
		t.Fatal(err)
	}
	for _, n := range list.Nodes {
		switch {
		case n.Hostname == "gpu-a" && (n.Links == nil || n.Links.Direct != 1 || n.Links.Relayed != 1):
			t.Errorf("gpu-a in the list: links %+v", n.Links)
		case n.Hostname == "gpu-c" && n.Links != nil:
			t.Errorf("gpu-c never reported but shows links %+v", n.Links)
		}
	}
	metrics := string(h.want(h.do("GET", "/metrics", testAdminToken, nil), 200, "metrics").raw)
	for _, want := range []string{`gridweave_mesh_links{state="relayed"} 1`, `gridweave_mesh_links{state="connecting"} 1`, `gridweave_mesh_links{state="direct"} 0`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("the metrics lack %s", want)
		}
	}
}

// TestHubMovesTheMasterEndpoint: validate and the peer directory answer
// the hub's endpoint (the leader's, with several server replicas), and
// the directory's revision changes when it moves, so waiting agents
// learn it.
func TestHubMovesTheMasterEndpoint(t *testing.T) {
	var hub atomic.Pointer[string]
	first := "192.0.2.10:51820"
	hub.Store(&first)
	h := newHarness(t, &harnessOptions{hub: func() string { return *hub.Load() }})
	_, key := h.mint("org")
	n := newNode(t, "gpu-hub")
	if r := h.want(h.validate(n, key), 200, "validate"); r.body["master_endpoint"] != first {
		t.Errorf("validate's master_endpoint %v, want the hub's %s", r.body["master_endpoint"], first)
	}
	dir := h.want(h.do("GET", "/v1/nodes/peers?hostname=gpu-hub", n.token, nil), 200, "peers")
	if dir.body["master_endpoint"] != first {
		t.Errorf("the directory's master_endpoint %v, want %s", dir.body["master_endpoint"], first)
	}
	// The reflexive-address service is reached at the hub's address too.
	if got := fmt.Sprint(dir.body["reflexive_endpoints"]); got != "[192.0.2.10:3478 192.0.2.10:3479]" {
		t.Errorf("the directory's reflexive_endpoints %s, want the hub's address at STUN_PORT and the next", got)
	}
	moved := "192.0.2.11:51820"
	hub.Store(&moved)
	since := dir.body["revision"].(string)
	again := h.want(h.do("GET", "/v1/nodes/peers?hostname=gpu-hub&wait=5&since="+since, n.token, nil), 200, "peers after the hub moved")
	if again.body["master_endpoint"] != moved || again.body["revision"] == since || fmt.Sprint(again.body["reflexive_endpoints"]) != "[192.0.2.11:3478 192.0.2.11:3479]" {
		t.Errorf("after the hub moved: %v at revision %v (was %s); want %s at a new revision", again.body["master_endpoint"], again.body["revision"], since, moved)
	}
	empty := ""
	hub.Store(&empty)
	n2 := newNode(t, "gpu-hub-2")
	if r := h.want(h.validate(n2, key), 200, "validate"); r.body["master_endpoint"] != "203.0.113.7:51820" {
		t.Errorf("with no hub known, validate's master_endpoint %v, want this server's MASTER_IP:WG_PORT", r.body["master_endpoint"])
	}
}

// TestEachOrgSeesItsOwnFleet: a node's directory names the nodes of its
// own org only, and those of the shared orgs (SHARED_ORGS), which see
// every node; links to a node outside the reporter's view do not count.
// An advertised endpoint in a private range reaches nobody unless the
// fleet shares a LAN (FLEET_LAN).
func TestEachOrgSeesItsOwnFleet(t *testing.T) {
	t.Parallel() // it waits on long polls: beside the others
	h := newHarness(t, &harnessOptions{config: func(c *gridweave.Config) { c.SharedOrgs = []string{"infra"} }})
	mintFor := func(org string) string {
		r := h.want(h.do("POST", "/v1/nodes/join-keys", testAdminToken, map[string]any{"kind": "org", "org": org, "ttl_seconds": 3600}), 201, "mint")
		return r.body["key"].(string)
	}
	nodes := map[string]*node{}
	for host, org := range map[string]string{"acme-1": "acme", "acme-2": "acme", "umbrella-1": "umbrella", "infra-1": "infra"} {
		n := newNode(t, host)
		h.want(h.validate(n, mintFor(org)), 200, "validate "+host)
		nodes[host] = n
	}
	seen := func(host string) []string {
		d := directoryOf(t, h.want(h.do("GET", "/v1/nodes/peers?hostname="+host, nodes[host].token, nil), 200, "peers of "+host))
		var names []string
		for _, p := range d.Peers {
			names = append(names, p.Hostname)
		}
		return names
	}
	for host, want := range map[string][]string{
		"acme-1":     {"acme-1", "acme-2", "infra-1"},
		"acme-2":     {"acme-1", "acme-2", "infra-1"},
		"umbrella-1": {"infra-1", "umbrella-1"},
		"infra-1":    {"acme-1", "acme-2", "infra-1", "umbrella-1"},
	} {
		if got := seen(host); !slices.Equal(got, want) {
			t.Errorf("%s sees %v, want %v", host, got, want)
		}
	}
	// A link an acme node reports to umbrella's node is not kept.
	u := nodes["umbrella-1"]
	h.want(h.do("POST", "/v1/nodes/links", nodes["acme-1"].token, api.LinksReport{Hostname: "acme-1", Links: []api.Link{
		{Hostname: "umbrella-1", PublicKey: u.public, State: api.LinkDirect},
		{Hostname: "acme-2", PublicKey: nodes["acme-2"].public, State: api.LinkDirect},
	}}), 200, "acme-1's report")
	var links api.NodeLinks
	if err := json.Unmarshal(h.want(h.do("GET", "/v1/nodes/acme-1/links", testAdminToken, nil), 200, "links").raw, &links); err != nil {
		t.Fatal(err)
	}
	if len(links.Links) != 1 || links.Links[0].Hostname != "acme-2" {
		t.Errorf("acme-1's links: %+v, want acme-2's alone", links.Links)
	}

	// Private endpoints: dropped without FLEET_LAN, kept with it.
	for _, lan := range []bool{false, true} {
		h := newHarness(t, &harnessOptions{config: func(c *gridweave.Config) { c.FleetLAN = lan }})
		_, key := h.mint("org")
		a, b := newNode(t, "lan-a"), newNode(t, "lan-b")
		h.want(h.validate(a, key), 200, "validate")
		h.want(h.validate(b, key), 200, "validate")
		h.want(h.do("POST", "/v1/nodes/links", a.token, api.LinksReport{Hostname: "lan-a", Endpoints: []string{"192.168.1.20:51820", "203.0.113.20:51820"}, Links: []api.Link{}}), 200, "report")
		want := []string{"203.0.113.20:51820"}
		if lan {
			want = []string{"192.168.1.20:51820", "203.0.113.20:51820"}
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			d := directoryOf(t, h.want(h.do("GET", "/v1/nodes/peers?hostname=lan-b", b.token, nil), 200, "peers"))
			pa, _ := peerNamed(d, "lan-a")
			if slices.Equal(pa.Endpoints, want) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("FLEET_LAN=%t: lan-a's endpoints %v, want %v", lan, pa.Endpoints, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// A node holds at most MaxPollsPerNode long polls of the directory open:
// one more is 429 too_many_polls; an immediate answer (no wait) is not
// counted.
func TestLongPollsPerNodeAreCapped(t *testing.T) {
	t.Parallel() // it waits on long polls: beside the others
	h := newHarness(t, nil)
	_, key := h.mint("org")
	a := newNode(t, "poller")
	h.want(h.validate(a, key), 200, "validate")
	first := directoryOf(t, h.want(h.do("GET", "/v1/nodes/peers?hostname=poller", a.token, nil), 200, "peers"))
	done := make(chan reply, gridweave.MaxPollsPerNode)
	for range gridweave.MaxPollsPerNode {
		go func() {
			done <- h.do("GET", "/v1/nodes/peers?hostname=poller&wait=6&since="+first.Revision, a.token, nil)
		}()
	}
	time.Sleep(time.Second) // the polls are waiting at the server
	r := h.do("GET", "/v1/nodes/peers?hostname=poller&wait=6&since="+first.Revision, a.token, nil)
	if r.status != 429 || r.errorField("code") != "too_many_polls" || r.header.Get("Retry-After") == "" {
		t.Errorf("a poll beyond the cap: %d %s", r.status, r.raw)
	}
	h.want(h.do("GET", "/v1/nodes/peers?hostname=poller", a.token, nil), 200, "an immediate answer beside the polls")
	for range gridweave.MaxPollsPerNode {
		h.want(<-done, 200, "a capped poll")
	}
	h.want(h.do("GET", "/v1/nodes/peers?hostname=poller&wait=1&since="+first.Revision, a.token, nil), 200, "a poll once the others ended")
}

// waitForRevision polls hostname's directory (whole) until its revision
// differs from since, and returns it.
func waitForRevision(t *testing.T, h *harness, n *node, since string) api.PeerDirectory {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		d := directoryOf(t, h.want(h.do("GET", "/v1/nodes/peers?hostname="+n.hostname, n.token, nil), 200, "peers"))
		if d.Revision != since {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("the directory stayed at %s", since)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPeerDirectoryDeltas: with delta=true, a node holding a revision is
// answered what changed since (the peers added or changed, the hostnames
// removed), over several changes too, whatever the fleet's size; a
// revision the server does not know gets the whole directory; a node
// polls the changes as they come.
func TestPeerDirectoryDeltas(t *testing.T) {
	t.Parallel() // it waits on long polls: beside the others
	h := newHarness(t, nil)
	_, key := h.mint("org")
	watcher := newNode(t, "watcher")
	h.want(h.validate(watcher, key), 200, "validate watcher")
	h.want(h.register(watcher, h100s(1)), 200, "register watcher")
	delta := func(since string) (api.PeerDirectory, int) {
		t.Helper()
		r := h.want(h.do("GET", "/v1/nodes/peers?hostname=watcher&delta=true&since="+since, watcher.token, nil), 200, "a delta")
		return directoryOf(t, r), len(r.raw)
	}
	hostnames := func(peers []api.DirectoryPeer) []string {
		var out []string
		for _, p := range peers {
			out = append(out, p.Hostname)
		}
		return out
	}

	// One join's delta names that node alone, at 5 nodes and at 200.
	var sizes []int
	joined := 1
	for _, fleet := range []int{5, 200} {
		for ; joined < fleet; joined++ {
			n := newNode(t, "gpu-"+strconv.Itoa(joined))
			h.want(h.validate(n, key), 200, "validate "+n.hostname)
		}
		before := waitForRevision(t, h, watcher, "")
		for len(before.Peers) != fleet {
			before = waitForRevision(t, h, watcher, before.Revision)
		}
		n := newNode(t, "new-"+strconv.Itoa(fleet))
		h.want(h.validate(n, key), 200, "validate "+n.hostname)
		after := waitForRevision(t, h, watcher, before.Revision)
		d, size := delta(before.Revision)
		if !d.Delta || d.Revision != after.Revision || !slices.Equal(hostnames(d.Peers), []string{n.hostname}) || len(d.Removed) != 0 {
			t.Fatalf("at %d nodes, a join's delta is %+v (want delta true, revision %s, peers [%s])", fleet, d, after.Revision, n.hostname)
		}
		if d.MasterEndpoint != after.MasterEndpoint || d.ClusterCIDR != after.ClusterCIDR || d.NodeCIDRMask != after.NodeCIDRMask {
			t.Errorf("the delta's master endpoint and pod range differ from the directory's: %+v, %+v", d, after)
		}
		sizes = append(sizes, size)
		joined++
	}
	if sizes[1] > sizes[0]+64 {
		t.Errorf("a join's delta grew with the fleet: %d bytes at 5 nodes, %d at 200", sizes[0], sizes[1])
	}

	// Several changes: a leave and a join since the revision held.
	held := waitForRevision(t, h, watcher, "")
	gone := newNode(t, "gone")
	h.want(h.validate(gone, key), 200, "validate gone")
	h.want(h.register(gone, h100s(1)), 200, "register gone")
	mid := waitForRevision(t, h, watcher, held.Revision)
	h.want(h.do("POST", "/v1/nodes/leave", gone.token, map[string]any{"hostname": "gone"}), 200, "leave")
	late := newNode(t, "late")
	h.want(h.validate(late, key), 200, "validate late")
	last := waitForRevision(t, h, watcher, mid.Revision)
	for _, ok := peerNamed(last, "late"); !ok; _, ok = peerNamed(last, "late") {
		last = waitForRevision(t, h, watcher, last.Revision)
	}
	if d, _ := delta(held.Revision); !d.Delta || !slices.Equal(hostnames(d.Peers), []string{"late"}) || len(d.Removed) != 0 {
		t.Errorf("the delta over a join, a leave and a join is %+v: want late added, gone neither added nor removed", d)
	}
	if d, _ := delta(mid.Revision); !d.Delta || !slices.Equal(hostnames(d.Peers), []string{"late"}) || !slices.Equal(d.Removed, []string{"gone"}) {
		t.Errorf("the delta since gone joined is %+v: want late added and gone removed", d)
	}
	if d, _ := delta(last.Revision); !d.Delta || len(d.Peers) != 0 || len(d.Removed) != 0 || d.Revision != last.Revision {
		t.Errorf("the delta since the current revision is %+v: want no change", d)
	}
	if d, _ := delta("not-a-revision"); d.Delta || len(d.Peers) != len(last.Peers) || d.Revision != last.Revision {
		t.Errorf("an unknown revision is answered %+v: want the whole directory", d)
	}
	// The whole directory, built from each peer's JSON, is what encoding
	// an api.PeerDirectory gives, byte for byte.
	whole := h.want(h.do("GET", "/v1/nodes/peers?hostname=watcher", watcher.token, nil), 200, "the whole directory")
	if again, _ := json.Marshal(directoryOf(t, whole)); strings.TrimSpace(string(whole.raw)) != string(again) {
		t.Errorf("the directory's body differs from api.PeerDirectory's encoding:\n%s\n%s", whole.raw, again)
	}
	if r := h.want(h.do("GET", "/v1/nodes/peers?hostname=watcher&delta=maybe&since="+last.Revision, watcher.token, nil), 400, "delta=maybe"); r.errorField("field") != "delta" {
		t.Errorf("the error names %q, not delta: %s", r.errorField("field"), r.raw)
	}

	// A long poll with delta answers the next change as a delta.
	answered := make(chan reply, 1)
	go func() {
		answered <- h.do("GET", "/v1/nodes/peers?hostname=watcher&delta=true&wait=60&since="+last.Revision, watcher.token, nil)
	}()
	h.want(h.do("POST", "/v1/nodes/leave", late.token, map[string]any{"hostname": "late"}), 200, "leave")
	select {
	case r := <-answered:
		if d := directoryOf(t, h.want(r, 200, "the long poll")); !d.Delta || len(d.Peers) != 0 || !slices.Equal(d.Removed, []string{"late"}) {
			t.Errorf("the long poll answered %+v: want late removed", d)
		}
	case <-time.After(50 * time.Second):
		t.Fatal("the long poll did not answer the leave")
	}
}

// TestParkedPolls: served without a wrapper that hides the connection, a
// waiting long poll leaves its handler (the connection is taken over) and
// is answered by the park: at the next change (a delta), or with the same
// revision when its wait is over, Connection: close either way; a node
// still holds at most two, and a poll whose client went away gives its
// place back.
func TestParkedPolls(t *testing.T) {
	t.Parallel() // it waits on long polls: beside the others
	s, kr := quietServer(t)
	ctx := context.Background()
	m, err := kr.Mint(ctx, joinkeys.MintRequest{Kind: joinkeys.KindOrg, Org: "org", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	join := func(hostname string) string {
		j, err := kr.Join(ctx, joinkeys.JoinRequest{Key: m.Secret, Hostname: hostname, PublicKey: newNode(t, "x").public})
		if err != nil {
			t.Fatal(err)
		}
		return j.NodeToken
	}
	token := join("waiter")
	join("other")
	var hijacked atomic.Int32
	srv := httptest.NewUnstartedServer(s.Handler())
	srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateHijacked {
			hijacked.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	type answer struct {
		status int
		dir    api.PeerDirectory
		close  bool
		err    error
	}
	poll := func(ctx context.Context, since string, wait int) <-chan answer {
		out := make(chan answer, 1)
		go func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/v1/nodes/peers?hostname=waiter&delta=true&since=%s&wait=%d", srv.URL, since, wait), nil)
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				out <- answer{err: err}
				return
			}
			defer resp.Body.Close()
			a := answer{status: resp.StatusCode, close: resp.Close}
			a.err = json.NewDecoder(resp.Body).Decode(&a.dir)
			out <- a
		}()
		return out
	}
	parkedBy := func(n int32) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for hijacked.Load() < n {
			if time.Now().After(deadline) {
				t.Fatalf("%d polls parked, want %d", hijacked.Load(), n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	first := <-poll(ctx, "", 0)
	if first.err != nil || first.status != 200 || first.dir.Delta || len(first.dir.Peers) != 2 {
		t.Fatalf("the first answer: %+v", first)
	}

	// A change answers a parked poll with a delta.
	changed := poll(ctx, first.dir.Revision, 30)
	parkedBy(1)
	join("newcomer")
	select {
	case a := <-changed:
		if a.err != nil || a.status != 200 || !a.dir.Delta || len(a.dir.Peers) != 1 || a.dir.Peers[0].Hostname != "newcomer" || !a.close {
			t.Errorf("the parked poll answered %+v: want a delta with newcomer, Connection: close", a)
		}
		first.dir.Revision = a.dir.Revision
	case <-time.After(20 * time.Second):
		t.Fatal("the parked poll did not answer the join")
	}

	// No change: the same revision when the wait is over.
	select {
	case a := <-poll(ctx, first.dir.Revision, 1):
		if a.err != nil || a.status != 200 || a.dir.Revision != first.dir.Revision || len(a.dir.Peers) != 0 {
			t.Errorf("a parked poll whose wait ended answered %+v: want revision %s, no change", a, first.dir.Revision)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a parked poll outlived its wait")
	}

	// Two parked polls hold the node's places; a third is refused until
	// one's client goes away.
	before := hijacked.Load()
	gone, leave := context.WithCancel(ctx)
	poll(gone, first.dir.Revision, 30)
	kept := poll(ctx, first.dir.Revision, 30)
	parkedBy(before + 2)
	if a := <-poll(ctx, first.dir.Revision, 30); a.status != http.StatusTooManyRequests {
		t.Errorf("a third poll: %+v, want 429", a)
	}
	leave()
	var third <-chan answer
	for deadline := time.Now().Add(10 * time.Second); third == nil; {
		// Until the client's close reaches the server, a third is refused.
		c := poll(ctx, first.dir.Revision, 30)
		for third == nil && hijacked.Load() < before+3 {
			select {
			case a := <-c:
				if a.status != http.StatusTooManyRequests || time.Now().After(deadline) {
					t.Fatalf("a poll beside one whose client left: %+v", a)
				}
				c = poll(ctx, first.dir.Revision, 30)
			case <-time.After(10 * time.Millisecond):
				if time.Now().After(deadline) {
					t.Fatal("a third poll neither parked nor was refused")
				}
			}
		}
		third = c
	}
	join("last")
	for _, c := range []<-chan answer{kept, third} {
		select {
		case a := <-c:
			if a.err != nil || a.status != 200 || !a.dir.Delta || len(a.dir.Peers) != 1 {
				t.Errorf("a parked poll answered %+v: want a delta with last", a)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("a parked poll did not answer the join")
		}
	}
}
