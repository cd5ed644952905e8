package gridweave

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"gridweave.dev/gridweave/api"
	"gridweave.dev/gridweave/linkbook"
	"gridweave.dev/joinkeys"
	"gridweave.dev/mesh"
	"gridweave.dev/mesh/wgkey"
)

// Direct links between nodes. Each node's agent waits on the peer
// directory (GET /v1/nodes/peers, a long poll) for the other nodes'
// keys, endpoints, VPN addresses and pod CIDRs, links to each of them
// directly, and reports how each link went (POST /v1/nodes/links); the
// master keeps the reports in memory (an agent reports again within
// seconds of a restart) and shows them to the admin. An agent that holds
// a revision of the directory is answered what changed since (a delta):
// each org's directory keeps its last changes for that.

// Bounds of the link routes.
const (
	// MaxPeersWait is the longest ?wait= of GET /v1/nodes/peers.
	MaxPeersWait = 60 * time.Second
	// directoryMaxAge is how old the directory may be when a caller
	// reads it: a change reaches the waiting agents within about this.
	directoryMaxAge      = time.Second
	maxReportedEndpoints = 8
	// MaxPollsPerNode bounds the long polls of the directory one node may
	// hold open at once (its agent holds one; a restart may overlap it).
	MaxPollsPerNode = 2
)

// pollCount counts the long polls each node holds open.
type pollCount struct {
	mu sync.Mutex
	n  map[string]int
}

// take reserves a poll for hostname; false when it holds
// MaxPollsPerNode already.
func (c *pollCount) take(hostname string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	if c.n[hostname] >= MaxPollsPerNode {
		return false
	}
	c.n[hostname]++
	return true
}

func (c *pollCount) give(hostname string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[hostname]--; c.n[hostname] <= 0 {
		delete(c.n, hostname)
	}
}

// peerDirectory is the last computed directory, shared by every waiting
// agent: at most one computation per directoryMaxAge, whatever the fleet
// size. Each org sees its own view of it (orgDirectory), made again after
// the directory changed, the first time a node of the org asks.
type peerDirectory struct {
	mu             sync.Mutex
	peers          []orgPeer // every node with a tunnel, by hostname
	masterEndpoint string
	orgs           map[string]*orgDirectory
	err            error     // of the last computation, kept as long as a directory
	at             time.Time // by the wall clock: the cache's age
	// changed is closed (and replaced) when the directory changes.
	changed chan struct{}
	// sum identifies the whole directory, to tell a change; generation
	// counts the changes.
	sum        string
	generation uint64
}

// expire makes the next reader compute the directory again.
func (d *peerDirectory) expire() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.at = time.Time{}
}

// orgPeer is a directory entry with the org its node joined for, and its
// JSON (made once per computation, for every view and digest).
type orgPeer struct {
	org string
	api.DirectoryPeer
	raw []byte
}

// orgDirectory is what the nodes of one org see, and how it came to be:
// the changes between its last views, from which a node that holds one of
// them is answered what changed since (a delta) rather than every node.
type orgDirectory struct {
	view       *directoryView
	generation uint64                    // of the directory view was made from
	entries    map[string]directoryEntry // view's peers by hostname
	// changes are the last maxViewChanges changes of the view, oldest
	// first; deltas caches the delta bodies answered since the last one,
	// by the revision they start from.
	changes []viewChange
	deltas  map[string][]byte
}

// directoryEntry is a peer of a view and its JSON, to tell a change.
type directoryEntry struct {
	peer api.DirectoryPeer
	raw  string
}

// viewChange is one change of an org's view: the hostnames added, those
// changed, and those gone.
type viewChange struct {
	from, to string // revisions
	added    []string
	changed  []string
	removed  []string
}

// maxViewChanges bounds the changes an org's directory keeps: a node
// that holds an older view (it was away through that many changes, or
// asks another replica) is answered the whole directory.
const maxViewChanges = 64

// directoryView is what the nodes of one org see: the body, its revision
// and the hostname → public key of every peer in it.
type directoryView struct {
	body     []byte
	revision string
	keys     map[string]string
	// The parts of the body a delta repeats.
	masterEndpoint string
	reflexive      []string
	podRange       joinkeys.PodRange
}

// countLinks summarises links by state.
func countLinks(links []api.Link, at time.Time) api.LinkCounts {
	c := api.LinkCounts{ReportedAt: at}
	for _, l := range links {
		switch l.State {
		case api.LinkDirect:
			c.Direct++
		case api.LinkRelayed:
			c.Relayed++
		case api.LinkConnecting:
			c.Connecting++
		}
	}
	return c
}

// directory returns the peer directory as the nodes of org see it (and
// the org's directory, whose deltas are read with the lock held: answer),
// computed again when it is older than directoryMaxAge, and the channel
// closed at its next change (of any org's view: a waiter looks again).
func (nr *nodeRoutes) directory(ctx context.Context, org string) (view *directoryView, od *orgDirectory, changed <-chan struct{}, err error) {
	d := &nr.peers
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.changed == nil {
		d.changed = make(chan struct{})
	}
	if !((d.peers != nil || d.err != nil) && time.Since(d.at) < directoryMaxAge) {
		peers, endpoint, err := nr.computeDirectory(ctx)
		if err != nil {
			// Kept as long as a directory would be: waiters retry at that
			// pace, not each on its own.
			d.peers, d.err, d.at = nil, err, time.Now()
			return nil, nil, nil, err
		}
		h := sha256.New()
		for _, p := range peers {
			h.Write([]byte(p.org))
			h.Write(p.raw)
		}
		h.Write([]byte(endpoint))
		sum := hex.EncodeToString(h.Sum(nil))
		if sum != d.sum && d.sum != "" {
			close(d.changed)
			d.changed = make(chan struct{})
		}
		if sum != d.sum {
			d.generation++
		}
		d.peers, d.masterEndpoint, d.sum, d.err, d.at = peers, endpoint, sum, nil, time.Now()
	}
	if d.err != nil {
		return nil, nil, nil, d.err
	}
	if d.orgs == nil {
		d.orgs = map[string]*orgDirectory{}
	}
	od = d.orgs[org]
	if od == nil {
		od = &orgDirectory{}
		d.orgs[org] = od
	}
	if od.view == nil || od.generation != d.generation {
		if err := nr.updateView(od, org, d.peers, d.masterEndpoint); err != nil {
			return nil, nil, nil, err
		}
		od.generation = d.generation
	}
	return od.view, od, d.changed, nil
}

// updateView makes od's view of peers again, and records what changed
// since its last one.
func (nr *nodeRoutes) updateView(od *orgDirectory, org string, peers []orgPeer, endpoint string) error {
	view, err := nr.viewFor(org, peers, endpoint)
	if err != nil {
		return err
	}
	entries := make(map[string]directoryEntry, len(view.keys))
	for _, p := range peers {
		if nr.mayLink(org, p.org) {
			entries[p.Hostname] = directoryEntry{peer: p.DirectoryPeer, raw: string(p.raw)}
		}
	}
	if od.view != nil && od.view.revision != view.revision {
		change := viewChange{from: od.view.revision, to: view.revision}
		for h, e := range entries {
			if old, ok := od.entries[h]; !ok {
				change.added = append(change.added, h)
			} else if old.raw != e.raw {
				change.changed = append(change.changed, h)
			}
		}
		for h := range od.entries {
			if _, ok := entries[h]; !ok {
				change.removed = append(change.removed, h)
			}
		}
		od.changes = append(od.changes, change)
		if extra := len(od.changes) - maxViewChanges; extra > 0 {
			od.changes = slices.Delete(od.changes, 0, extra)
		}
	}
	if od.view == nil || od.view.revision != view.revision {
		od.deltas = map[string][]byte{}
	}
	od.view, od.entries = view, entries
	return nil
}

// delta is the body answering a node that holds the view at revision
// since: the peers added or changed since, and the hostnames gone; false
// when od does not know that revision (too old, or another replica's),
// and the node is answered the whole view. Called with the directory's
// lock held.
func (od *orgDirectory) delta(since string) ([]byte, bool) {
	if body, ok := od.deltas[since]; ok {
		return body, true
	}
	start := -1
	if since == od.view.revision {
		start = len(od.changes)
	} else {
		for i, c := range od.changes {
			if c.from == since {
				start = i
			}
		}
	}
	if start < 0 {
		return nil, false
	}
	// A hostname touched since is in the answer if it is in the view now,
	// and among the removed if it is not but was in the view at since
	// (its first change then was not its addition).
	touched := map[string]bool{} // hostname → in the view at since
	for _, c := range od.changes[start:] {
		for _, h := range c.added {
			if _, seen := touched[h]; !seen {
				touched[h] = false
			}
		}
		for _, h := range slices.Concat(c.changed, c.removed) {
			if _, seen := touched[h]; !seen {
				touched[h] = true
			}
		}
	}
	dir := api.PeerDirectory{Revision: od.view.revision, Delta: true, Peers: []api.DirectoryPeer{}, MasterEndpoint: od.view.masterEndpoint,
		ReflexiveEndpoints: od.view.reflexive, ClusterCIDR: od.view.podRange.Cluster.String(), NodeCIDRMask: od.view.podRange.NodeBits}
	for h, before := range touched {
		if e, present := od.entries[h]; present {
			dir.Peers = append(dir.Peers, e.peer)
		} else if before {
			dir.Removed = append(dir.Removed, h)
		}
	}
	slices.SortFunc(dir.Peers, func(a, b api.DirectoryPeer) int { return strings.Compare(a.Hostname, b.Hostname) })
	slices.Sort(dir.Removed)
	body, err := json.Marshal(dir)
	if err != nil {
		return nil, false
	}
	od.deltas[since] = body
	return body, true
}

// mayLink reports whether the nodes of orgs a and b see each other in the
// directory: one org, or either of them shared (Config.SharedOrgs).
func (nr *nodeRoutes) mayLink(a, b string) bool {
	return a == b || slices.Contains(nr.cfg.SharedOrgs, a) || slices.Contains(nr.cfg.SharedOrgs, b)
}

// viewFor is the directory the nodes of org see: the nodes they may link
// to (mayLink), and nothing of any other org's fleet.
func (nr *nodeRoutes) viewFor(org string, peers []orgPeer, endpoint string) (*directoryView, error) {
	podRange := nr.fleet.PodRange()
	keys := map[string]string{}
	// The peers' JSON array, as json.Marshal writes it, from each peer's.
	list := bytes.NewBufferString("[")
	for _, p := range peers {
		if nr.mayLink(org, p.org) {
			if len(keys) > 0 {
				list.WriteByte(',')
			}
			list.Write(p.raw)
			keys[p.Hostname] = p.PublicKey
		}
	}
	list.WriteByte(']')
	reflexive := nr.reflexiveEndpoints(endpoint)
	sum := sha256.Sum256(append(append(slices.Clip(list.Bytes()), endpoint...), strings.Join(reflexive, ",")...))
	revision := hex.EncodeToString(sum[:12])
	// api.PeerDirectory's fields, in its order, the peers as they are.
	body, err := json.Marshal(struct {
		Revision       string          `json:"revision"`
		Peers          json.RawMessage `json:"peers"`
		ClusterCIDR    string          `json:"cluster_cidr"`
		NodeCIDRMask   int             `json:"node_cidr_mask"`
		MasterEndpoint string          `json:"master_endpoint,omitempty"`
		Reflexive      []string        `json:"reflexive_endpoints,omitempty"`
	}{revision, list.Bytes(), podRange.Cluster.String(), podRange.NodeBits, endpoint, reflexive})
	if err != nil {
		return nil, err
	}
	return &directoryView{body: body, revision: revision, keys: keys, masterEndpoint: endpoint, reflexive: reflexive, podRange: podRange}, nil
}

// reflexiveEndpoints are the master's reflexive-address service's two
// ports at the address of the master endpoint; none when it is off.
func (nr *nodeRoutes) reflexiveEndpoints(masterEndpoint string) []string {
	host, _, err := net.SplitHostPort(masterEndpoint)
	if err != nil || nr.cfg.ReflexivePort == 0 {
		return nil
	}
	return []string{net.JoinHostPort(host, strconv.Itoa(nr.cfg.ReflexivePort)), net.JoinHostPort(host, strconv.Itoa(nr.cfg.ReflexivePort+1))}
}

// computeDirectory lists the nodes that have a tunnel (validated or
// registered), each with the endpoints to try: where the master's device
// sees its packets come from, then what its agent reported; and where the
// master's device is reached now.
func (nr *nodeRoutes) computeDirectory(ctx context.Context) ([]orgPeer, string, error) {
	nodes, err := nr.keyring.Nodes(ctx)
	if err != nil {
		return nil, "", err
	}
	observed := map[wgkey.Key]netip.AddrPort{}
	if o, ok := nr.mesh.(mesh.Observer); ok {
		statuses, err := o.PeerStatuses(ctx)
		if err != nil {
			return nil, "", err
		}
		for _, st := range statuses {
			observed[st.PublicKey] = st.Endpoint
		}
	}
	reports, err := nr.links.All(ctx)
	if err != nil {
		// The endpoints the master's device observes still lead there.
		nr.log.WarnContext(ctx, "peer directory without the agents' link reports", "err", err)
		reports = nil
	}
	present := make(map[string]bool, len(nodes))
	peers := []orgPeer{}
	for _, n := range nodes {
		present[n.Hostname] = true
		if n.Status == joinkeys.StatusDisconnected || !n.VPNIP.IsValid() {
			continue
		}
		p := api.DirectoryPeer{Hostname: n.Hostname, PublicKey: n.PublicKey.String(), VPNIP: n.VPNIP.String(), Endpoints: []string{}}
		if n.PodCIDR.IsValid() && nr.fleet.CheckPodCIDR(n.PodCIDR) == nil {
			p.PodCIDR = n.PodCIDR.String()
		}
		var eps []netip.AddrPort
		if ep, ok := observed[n.PublicKey]; ok && ep.IsValid() {
			eps = append(eps, ep)
			if r, ok := reports[n.Hostname]; ok && r.ListenPort != 0 && int(ep.Port()) != r.ListenPort {
				// Behind a NAT that keeps the address but not the port:
				// the device's own port at that address may answer too.
				eps = append(eps, netip.AddrPortFrom(ep.Addr(), uint16(r.ListenPort)))
			}
		}
		if r, ok := reports[n.Hostname]; ok {
			eps = append(eps, r.Endpoints...)
			p.NAT = r.NAT
		}
		for _, ep := range eps {
			if !slices.Contains(p.Endpoints, ep.String()) {
				p.Endpoints = append(p.Endpoints, ep.String())
			}
		}
		raw, err := json.Marshal(p)
		if err != nil {
			return nil, "", err
		}
		peers = append(peers, orgPeer{org: n.Org, DirectoryPeer: p, raw: raw})
	}
	if err := nr.links.Keep(ctx, present); err != nil {
		nr.log.WarnContext(ctx, "forgetting the link reports of nodes that left", "err", err)
	}
	slices.SortFunc(peers, func(a, b orgPeer) int { return strings.Compare(a.Hostname, b.Hostname) })
	return peers, nr.masterEndpoint(), nil
}

// authenticateLiveNode returns the node whose token the request bears,
// unless it is being disconnected: a node on its way out neither reads
// its directory nor reports links.
func (nr *nodeRoutes) authenticateLiveNode(r *http.Request, hostname string) (joinkeys.Node, error) {
	node, err := nr.keyring.AuthenticateNode(r.Context(), hostname, bearer(r))
	if err != nil {
		return joinkeys.Node{}, nr.nodeCredentialError(r, err)
	}
	if node.Status == joinkeys.StatusDisconnected {
		return joinkeys.Node{}, fmt.Errorf("%w: %q is being disconnected", joinkeys.ErrNodeDisconnected, hostname)
	}
	return node, nil
}

// handlePeers answers the peer directory to a node: at once, or, with
// ?since= the revision the node holds and ?wait= seconds, when the
// directory differs from it or the wait is over (then the same revision
// again).
func (nr *nodeRoutes) handlePeers(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	hostname := q.Get("hostname")
	node, err := nr.authenticateLiveNode(r, hostname)
	if err != nil {
		nr.writeError(w, r, err)
		return
	}
	wait := time.Duration(0)
	if v := q.Get("wait"); v != "" {
		secs, err := strconv.Atoi(v)
		if err != nil || secs < 0 || secs > int(MaxPeersWait/time.Second) {
			nr.writeError(w, r, badField("wait", "wait must be whole seconds from 0 to %d, got %q", int(MaxPeersWait.Seconds()), v))
			return
		}
		wait = time.Duration(secs) * time.Second
	}
	since := q.Get("since")
	delta := false
	if v := q.Get("delta"); v != "" {
		if delta, err = strconv.ParseBool(v); err != nil {
			nr.writeError(w, r, badField("delta", "delta must be true or false, got %q", v))
			return
		}
	}
	release := func() {}
	if wait > 0 {
		// A restarted agent's old poll, parked, holds its place until
		// its client is found gone.
		if !nr.polls.take(hostname) && (nr.park.dropDead(hostname) == 0 || !nr.polls.take(hostname)) {
			w.Header().Set("Retry-After", "5")
			nr.writeError(w, r, &apiError{code: api.CodeTooManyPolls,
				message: fmt.Sprintf("node %s already holds %d long polls of the directory open; close one first", hostname, MaxPollsPerNode)})
			return
		}
		release = sync.OnceFunc(func() { nr.polls.give(hostname) })
	}
	parked, triedPark := false, false
	defer func() {
		if !parked {
			release()
		}
	}()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	tick := time.NewTicker(directoryMaxAge)
	defer tick.Stop()
	for {
		body, changed, err := nr.answerPeers(r.Context(), node.Org, since, delta, wait == 0)
		if err != nil {
			nr.writeError(w, r, err)
			return
		}
		if body != nil {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "no-store")
			_, _ = w.Write(body)
			return
		}
		if !triedPark && r.Method == http.MethodGet { // a HEAD's answer has no body
			triedPark = true
			poll := &parkedPoll{hostname: hostname, org: node.Org, since: since, delta: delta, deadline: time.Now().Add(wait), done: release}
			if parked = nr.park.park(w, poll); parked {
				return
			}
		}
		select {
		case <-r.Context().Done():
			return
		case <-deadline.C:
			wait = 0
		case <-changed:
		case <-tick.C:
		}
	}
}

// answerPeers is the body answering a node of org that holds the view at
// revision since: nil (and the channel closed at the next change) while
// that view is the current one, unless now; with delta, the changes since
// that view when the server knows it, else the whole view.
func (nr *nodeRoutes) answerPeers(ctx context.Context, org, since string, delta, now bool) ([]byte, <-chan struct{}, error) {
	view, od, changed, err := nr.directory(ctx, org)
	if err != nil {
		return nil, nil, err
	}
	if view.revision == since && !now {
		return nil, changed, nil
	}
	if delta && since != "" {
		nr.peers.mu.Lock()
		body, ok := od.delta(since)
		nr.peers.mu.Unlock()
		if ok {
			return body, nil, nil
		}
	}
	return view.body, nil, nil
}

// reportLinks keeps a node's report of its links.
func (nr *nodeRoutes) reportLinks(r *http.Request, req api.LinksReport) (api.LinksAccepted, error) {
	node, err := nr.authenticateLiveNode(r, req.Hostname)
	if err != nil {
		return api.LinksAccepted{}, err
	}
	report, err := checkLinksReport(req, nr.cfg.VPNCIDR, nr.cfg.FleetLAN)
	if err != nil {
		return api.LinksAccepted{}, err
	}
	// Only links to nodes of the node's directory, by their keys, count.
	view, _, _, err := nr.directory(r.Context(), node.Org)
	if err != nil {
		return api.LinksAccepted{}, err
	}
	keys := view.keys
	report.Links = slices.DeleteFunc(report.Links, func(l api.Link) bool { return l.Hostname == req.Hostname || keys[l.Hostname] != l.PublicKey })
	report.At = nr.now().UTC()
	report.Counts = countLinks(report.Links, report.At)
	if err := nr.links.Put(r.Context(), req.Hostname, report); err != nil {
		return api.LinksAccepted{}, err
	}
	return api.LinksAccepted{Hostname: req.Hostname, Counts: report.Counts}, nil
}

// checkLinksReport checks every field of a report, naming the one that
// is wrong. An advertised endpoint in a private range is kept only when
// the fleet shares a LAN (Config.FleetLAN): otherwise it names a host of
// the machine's own network, which another org's machine would be sent
// to probe.
func checkLinksReport(req api.LinksReport, vpn netip.Prefix, lan bool) (linkbook.Report, error) {
	out := linkbook.Report{ListenPort: req.ListenPort, NAT: req.NAT, Links: make([]api.Link, 0, len(req.Links))}
	switch req.NAT {
	case "", api.NATNone, api.NATEndpointIndependent, api.NATEndpointDependent, api.NATUnknown:
	default:
		return linkbook.Report{}, badField("nat", "nat must be none, endpoint_independent, endpoint_dependent or unknown (or left out), got %q", req.NAT)
	}
	if req.ListenPort < 0 || req.ListenPort > 65535 {
		return linkbook.Report{}, badField("listen_port", "listen_port must be a port from 1 to 65535 (or left out), got %d", req.ListenPort)
	}
	if len(req.Endpoints) > maxReportedEndpoints {
		return linkbook.Report{}, badField("endpoints", "at most %d endpoints, got %d", maxReportedEndpoints, len(req.Endpoints))
	}
	for i, e := range req.Endpoints {
		ep, err := netip.ParseAddrPort(e)
		if err != nil || ep.Port() == 0 || !ep.Addr().IsGlobalUnicast() {
			return linkbook.Report{}, badField(fmt.Sprintf("endpoints[%d]", i), "endpoints[%d] must be a unicast address:port, got %q", i, e)
		}
		if vpn.Contains(ep.Addr().Unmap()) {
			return linkbook.Report{}, badField(fmt.Sprintf("endpoints[%d]", i), "endpoints[%d] %s is inside the VPN %s: an endpoint is where the tunnel is reached from outside", i, e, vpn)
		}
		if !lan && localOnly(ep.Addr().Unmap()) {
			continue
		}
		out.Endpoints = append(out.Endpoints, netip.AddrPortFrom(ep.Addr().Unmap(), ep.Port()))
	}
	if len(req.Links) > api.MaxLinksPerReport {
		return linkbook.Report{}, badField("links", "at most %d links, got %d", api.MaxLinksPerReport, len(req.Links))
	}
	for i, l := range req.Links {
		field := fmt.Sprintf("links[%d]", i)
		if err := joinkeys.ValidateHostname(l.Hostname); err != nil {
			return linkbook.Report{}, badField(field+".hostname", "%s.hostname: %v", field, err)
		}
		if _, err := wgkey.Parse(l.PublicKey); err != nil {
			return linkbook.Report{}, badField(field+".public_key", "%s.public_key: %v", field, err)
		}
		switch l.State {
		case api.LinkDirect, api.LinkRelayed, api.LinkConnecting:
		default:
			return linkbook.Report{}, badField(field+".state", "%s.state must be direct, relayed or connecting, got %q", field, l.State)
		}
		switch l.RelayedReason {
		case "":
		case api.RelayedNoCandidate, api.RelayedSymmetricNAT, api.RelayedProbesTimedOut, api.RelayedHubOnly, api.RelayedIdle:
			if l.State != api.LinkRelayed {
				return linkbook.Report{}, badField(field+".relayed_reason", "%s.relayed_reason is only for a relayed link, this one is %s", field, l.State)
			}
		default:
			return linkbook.Report{}, badField(field+".relayed_reason", "%s.relayed_reason must be no_candidate, symmetric_nat, probes_timed_out, hub_only or idle (or left out), got %q", field, l.RelayedReason)
		}
		if l.Endpoint != "" {
			if _, err := netip.ParseAddrPort(l.Endpoint); err != nil {
				return linkbook.Report{}, badField(field+".endpoint", "%s.endpoint must be address:port or empty, got %q", field, l.Endpoint)
			}
		}
		if l.RxBytes < 0 {
			return linkbook.Report{}, badField(field+".rx_bytes", "%s.rx_bytes cannot be negative, got %d", field, l.RxBytes)
		}
		if l.TxBytes < 0 {
			return linkbook.Report{}, badField(field+".tx_bytes", "%s.tx_bytes cannot be negative, got %d", field, l.TxBytes)
		}
		out.Links = append(out.Links, l)
	}
	return out, nil
}

// sharedAddressSpace is 100.64.0.0/10 (RFC 6598), carrier-grade NAT's:
// like a private range, an address there means something only inside one
// provider's network.
var sharedAddressSpace = netip.MustParsePrefix("100.64.0.0/10")

// localOnly reports whether a is an address that means something only on
// one network: private (RFC 1918, IPv6 ULA) or shared (CGNAT).
func localOnly(a netip.Addr) bool { return a.IsPrivate() || sharedAddressSpace.Contains(a) }

// nodeLinks answers a node's last link report (admin).
func (nr *nodeRoutes) nodeLinks(r *http.Request, _ noBody) (api.NodeLinks, error) {
	h, err := nr.pathNode(r)
	if err != nil {
		return api.NodeLinks{}, err
	}
	out := api.NodeLinks{Hostname: h, Links: []api.Link{}}
	rep, ok, err := nr.links.Get(r.Context(), h)
	if err != nil {
		return api.NodeLinks{}, err
	}
	if ok {
		at := rep.At
		out.ReportedAt, out.Counts, out.Links, out.NAT = &at, rep.Counts, rep.Links, rep.NAT
		for _, ep := range rep.Endpoints {
			out.Endpoints = append(out.Endpoints, ep.String())
		}
	}
	return out, nil
}

// linkCounts returns the summaries of the nodes' last reports for their
// views, by hostname (none for a node whose agent never reported): one
// node's read alone, more nodes' from one read of every report. A book
// that cannot be read leaves the summaries out.
func (nr *nodeRoutes) linkCounts(ctx context.Context, nodes []joinkeys.Node) map[string]api.LinkCounts {
	out := map[string]api.LinkCounts{}
	if len(nodes) == 1 {
		if rep, ok, err := nr.links.Get(ctx, nodes[0].Hostname); err == nil && ok {
			out[nodes[0].Hostname] = rep.Counts
		}
		return out
	}
	all, err := nr.links.All(ctx)
	if err != nil {
		nr.log.WarnContext(ctx, "node views without their link counts", "err", err)
	}
	for h, rep := range all {
		out[h] = rep.Counts
	}
	return out
}

// linkPairs counts the links between pairs of nodes by state, for the
// metrics: a pair is direct when both ends that reported say direct,
// relayed when one says relayed, connecting otherwise.
func (nr *nodeRoutes) linkPairs(ctx context.Context) map[api.LinkState]int {
	type pair struct{ a, b string }
	rank := map[api.LinkState]int{api.LinkDirect: 0, api.LinkConnecting: 1, api.LinkRelayed: 2}
	worst := map[pair]api.LinkState{}
	all, _ := nr.links.All(ctx)
	for host, rep := range all {
		for _, l := range rep.Links {
			p := pair{host, l.Hostname}
			if p.b < p.a {
				p.a, p.b = p.b, p.a
			}
			if cur, ok := worst[p]; !ok || rank[l.State] > rank[cur] {
				worst[p] = l.State
			}
		}
	}
	out := map[api.LinkState]int{api.LinkDirect: 0, api.LinkRelayed: 0, api.LinkConnecting: 0}
	for _, st := range worst {
		out[st]++
	}
	return out
}
