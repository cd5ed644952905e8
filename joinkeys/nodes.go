package joinkeys

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"gridweave.dev/internal/randhex"
	"gridweave.dev/mesh/wgkey"
)

// JoinRequest is a node's validate call.
type JoinRequest struct {
	Key       string // the join key; required for a first join
	NodeToken string // the node's token; required for a re-join
	Hostname  string
	PublicKey string // WireGuard public key, base64
	Version   string
	Source    string // e.g. the caller's address, for the audit trail
}

// JoinResult is what a node gets back.
type JoinResult struct {
	Node Node
	// NodeToken proves the node's identity on re-joins and version reports.
	// A first join gets a new one (stored hashed); a re-join gets back the
	// token it presented.
	NodeToken string
	Rejoined  bool
}

// Join admits a node. A first join needs a usable key: one use is spent and
// a VPN address reserved for the public key in one store transaction. A
// re-join (same public key, same hostname) needs the node token instead and
// works after the key expired; it keeps the address. A hostname held by
// another public key is *HostnameTakenError. Every outcome is audited.
func (k *Keyring) Join(ctx context.Context, req JoinRequest) (JoinResult, error) {
	res, keyID, err := k.join(ctx, req)
	if err != nil {
		reason := err.Error()
		k.auditRejected(ctx, AuditEvent{Type: EventValidationRejected, KeyID: keyID, Hostname: req.Hostname, Actor: req.Source, Reason: reason})
		k.log.InfoContext(ctx, "join rejected", "key_id", keyID, "hostname", req.Hostname, "reason", reason)
		return JoinResult{}, err
	}
	k.log.InfoContext(ctx, "join accepted", "key_id", keyID, "hostname", res.Node.Hostname, "vpn_ip", res.Node.VPNIP, "rejoin", res.Rejoined)
	return res, nil
}

func (k *Keyring) join(ctx context.Context, req JoinRequest) (JoinResult, string, error) {
	if err := ValidateHostname(req.Hostname); err != nil {
		return JoinResult{}, "", err
	}
	pub, err := ParsePublicKey(req.PublicKey)
	if err != nil {
		return JoinResult{}, "", err
	}
	if err := checkVersionField(req.Version); err != nil {
		return JoinResult{}, "", err
	}
	if k.pool.Size() == 0 {
		return JoinResult{}, "", errors.New("joinkeys: Keyring has no address pool (Options.Pool)")
	}

	existing, err := k.store.NodeByPublicKey(ctx, pub)
	switch {
	case err == nil:
		return k.rejoin(ctx, existing, req)
	case !errors.Is(err, ErrNodeNotFound):
		return JoinResult{}, "", err
	}
	if req.Key == "" {
		if req.NodeToken != "" {
			// A store may answer the lookup by key from a cache a moment
			// behind (a replica's, just after the node's first join): ask
			// by hostname, which reads the record itself, before refusing.
			byName, err := k.store.Node(ctx, req.Hostname)
			switch {
			case err == nil && byName.PublicKey == pub:
				return k.rejoin(ctx, byName, req)
			case err != nil && !errors.Is(err, ErrNodeNotFound):
				return JoinResult{}, "", err
			}
			return JoinResult{}, "", fmt.Errorf("%w: no node has this public key", ErrNodeTokenInvalid)
		}
		return JoinResult{}, "", fieldError("key", "is required for a first join")
	}
	key, err := k.lookup(ctx, req.Key)
	if err != nil {
		return JoinResult{}, "", err
	}
	now := k.now().UTC()
	if err := key.UsableAt(now); err != nil {
		return JoinResult{}, key.ID, fmt.Errorf("key %s: %w", key.ID, err)
	}
	token := nodeTokenPfx + randhex.String(secretHexLen/2)
	rec, err := k.store.ReserveNode(ctx, Reservation{
		Node: NodeRecord{
			Node: Node{
				Hostname:  req.Hostname,
				PublicKey: pub,
				Org:       key.Org,
				JoinKeyID: key.ID,
				Version:   req.Version,
				Status:    StatusValidated,
				CreatedAt: now,
				UpdatedAt: now,
				LastSeen:  now,
			},
			TokenHash: hashToken(token),
		},
		Addresses:      k.pool.Addresses(),
		SpendKeyID:     key.ID,
		Now:            now,
		ReleasedBefore: now.Add(-k.quarantine),
		Event:          AuditEvent{At: now, Type: EventValidationAccepted, KeyID: key.ID, Hostname: req.Hostname, Actor: req.Source, Reason: "first join"},
	})
	var pkTaken *PublicKeyTakenError
	if errors.As(err, &pkTaken) && pkTaken.Existing.Hostname == req.Hostname {
		// A concurrent first join of the same node won; this one is now a
		// re-join and needs the token it does not have.
		return JoinResult{}, key.ID, ErrNodeTokenRequired
	}
	if err != nil {
		return JoinResult{}, key.ID, err
	}
	k.misses.forget(req.Hostname)
	return JoinResult{Node: rec.Node, NodeToken: token}, key.ID, nil
}

func (k *Keyring) rejoin(ctx context.Context, existing NodeRecord, req JoinRequest) (JoinResult, string, error) {
	if existing.Hostname != req.Hostname {
		return JoinResult{}, existing.JoinKeyID, &PublicKeyTakenError{Existing: existing.Node}
	}
	if req.NodeToken == "" {
		return JoinResult{}, existing.JoinKeyID, fmt.Errorf("%w (hostname %q); to start over, disconnect the node first", ErrNodeTokenRequired, existing.Hostname)
	}
	now := k.now().UTC()
	rec, err := k.changeNode(ctx, existing, func(rec *NodeRecord) error {
		if rec.PublicKey != existing.PublicKey || !tokenMatches(*rec, req.NodeToken) {
			return ErrNodeTokenInvalid
		}
		if rec.Status == StatusDisconnected {
			return fmt.Errorf("%w: %q is being disconnected; join again once the disconnect finished", ErrNodeDisconnected, rec.Hostname)
		}
		if req.Version != "" {
			rec.Version = req.Version
		}
		rec.UpdatedAt, rec.LastSeen = now, now
		return nil
	}, func(rec NodeRecord) AuditEvent {
		return AuditEvent{Type: EventValidationAccepted, KeyID: rec.JoinKeyID, Hostname: rec.Hostname, Actor: req.Source, Reason: "re-join with node token"}
	})
	if err != nil {
		return JoinResult{}, existing.JoinKeyID, err
	}
	return JoinResult{Node: rec.Node, NodeToken: req.NodeToken, Rejoined: true}, rec.JoinKeyID, nil
}

// maxWriteAttempts bounds how often a node write is tried again from a
// fresh read after another write got in between.
const maxWriteAttempts = 8

// changeNode applies change to the node as stored and writes it back under
// its revision. When another write got in between, it reads the node again
// and applies change to the fresh record, so change must decide from the
// record it is given (and check the caller's credentials there: after a
// release the hostname may belong to another machine). first, if it has a
// hostname, is a record already read.
//
// event, if not nil, makes the audit event of the change from the record
// as it will be written; the store appends it in the write's transaction.
func (k *Keyring) changeNode(ctx context.Context, first NodeRecord, change func(*NodeRecord) error, event func(NodeRecord) AuditEvent) (NodeRecord, error) {
	rec := first
	for attempt := 1; ; attempt++ {
		if attempt > 1 {
			var err error
			if rec, err = k.store.Node(ctx, first.Hostname); err != nil {
				return NodeRecord{}, err
			}
		}
		if err := change(&rec); err != nil {
			return NodeRecord{}, err
		}
		var e AuditEvent
		if event != nil {
			e = event(rec)
			e.At = k.now().UTC()
		}
		written, err := k.store.UpdateNode(ctx, rec, e)
		if errors.Is(err, ErrNodeChanged) && attempt < maxWriteAttempts {
			continue
		}
		if errors.Is(err, ErrNodeChanged) {
			return NodeRecord{}, fmt.Errorf("node %q: %w %d times in a row; try again", first.Hostname, err, attempt)
		}
		return written, err
	}
}

// changeNodeByHostname is changeNode starting from a fresh read.
func (k *Keyring) changeNodeByHostname(ctx context.Context, hostname string, change func(*NodeRecord) error, event func(NodeRecord) AuditEvent) (NodeRecord, error) {
	if err := ValidateHostname(hostname); err != nil {
		return NodeRecord{}, err
	}
	rec, err := k.store.Node(ctx, hostname)
	if err != nil {
		return NodeRecord{}, err
	}
	return k.changeNode(ctx, rec, change, event)
}

func tokenMatches(rec NodeRecord, token string) bool {
	if len(token) != nodeTokenLen || !strings.HasPrefix(token, nodeTokenPfx) {
		return false
	}
	return subtle.ConstantTimeCompare(hashToken(token), rec.TokenHash) == 1
}

// AuthenticateNode returns the node with hostname if token is its node
// token. A hostname the ledger did not hold a moment ago (missTTL) is
// refused without reading the store again: a caller probing one name
// with made-up tokens costs the store one read per missTTL, not one per
// request.
func (k *Keyring) AuthenticateNode(ctx context.Context, hostname, token string) (Node, error) {
	if err := ValidateHostname(hostname); err != nil {
		return Node{}, err
	}
	if k.misses.recent(hostname, k.now()) {
		return Node{}, ErrNodeTokenInvalid
	}
	epoch := k.misses.epoch()
	rec, err := k.store.Node(ctx, hostname)
	if errors.Is(err, ErrNodeNotFound) {
		k.misses.add(hostname, k.now(), epoch)
		return Node{}, ErrNodeTokenInvalid
	}
	if err != nil {
		return Node{}, err
	}
	if !tokenMatches(rec, token) {
		return Node{}, ErrNodeTokenInvalid
	}
	return rec.Node, nil
}

// Registration is a node's register call, after its tunnel is up. A node
// never names its pod CIDR: that comes from Kubernetes (SetNodePodCIDR).
type Registration struct {
	// NodeToken, or Key together with the PublicKey the node was reserved
	// for by that same key. The key only completes a reservation still in
	// StatusValidated; every later registration needs the node token.
	NodeToken string
	Key       string
	Hostname  string
	PublicKey string
	Version   string
	GPUs      []GPU
	Source    string
}

// Register finalises a node: status registered, version and GPUs. The
// same report twice changes nothing but the node's times.
func (k *Keyring) Register(ctx context.Context, r Registration) (Node, error) {
	node, err := k.register(ctx, r)
	if err != nil {
		k.auditRejected(ctx, AuditEvent{Type: EventValidationRejected, Hostname: r.Hostname, Actor: r.Source, Reason: "register: " + err.Error()})
		return Node{}, err
	}
	k.log.InfoContext(ctx, "node registered", "hostname", node.Hostname, "vpn_ip", node.VPNIP, "gpus", len(node.GPUs))
	return node, nil
}

func (k *Keyring) register(ctx context.Context, r Registration) (Node, error) {
	if err := ValidateHostname(r.Hostname); err != nil {
		return Node{}, err
	}
	if err := checkVersionField(r.Version); err != nil {
		return Node{}, err
	}
	if err := validateGPUs(r.GPUs); err != nil {
		return Node{}, err
	}
	var authorize func(rec NodeRecord) error
	switch {
	case r.NodeToken != "":
		authorize = func(rec NodeRecord) error {
			if !tokenMatches(rec, r.NodeToken) {
				return ErrNodeTokenInvalid
			}
			return nil
		}
	case r.Key != "":
		pub, err := ParsePublicKey(r.PublicKey)
		if err != nil {
			return Node{}, err
		}
		key, err := k.Check(ctx, r.Key)
		if err != nil && !errors.Is(err, ErrKeyExhausted) { // its last use may have admitted this node
			return Node{}, err
		}
		authorize = func(rec NodeRecord) error {
			if pub != rec.PublicKey || key.ID != rec.JoinKeyID {
				return fmt.Errorf("%w: the key and public key do not match the reservation of %q", ErrNodeTokenRequired, r.Hostname)
			}
			if rec.Status != StatusValidated {
				return fmt.Errorf("%w: %q is %s, and the join key only completes a validated reservation", ErrNodeTokenRequired, r.Hostname, rec.Status)
			}
			return nil
		}
	default:
		return Node{}, fieldError("node_token", "a node token (or the join key with the reserved public key) is required")
	}
	rec, err := k.store.Node(ctx, r.Hostname)
	if errors.Is(err, ErrNodeNotFound) {
		return Node{}, fmt.Errorf("%w: %q has not been validated", ErrNodeNotFound, r.Hostname)
	}
	if err != nil {
		return Node{}, err
	}
	now := k.now().UTC()
	rec, err = k.changeNode(ctx, rec, func(rec *NodeRecord) error {
		if err := authorize(*rec); err != nil {
			return err
		}
		if rec.Status == StatusDisconnected {
			return fmt.Errorf("%w: %q is being disconnected; join again once the disconnect finished", ErrNodeDisconnected, rec.Hostname)
		}
		if r.Version != "" {
			rec.Version = r.Version
		}
		rec.GPUs = slices.Clone(r.GPUs)
		rec.Status = StatusRegistered
		if rec.RegisteredAt.IsZero() {
			rec.RegisteredAt = now
		}
		rec.UpdatedAt, rec.LastSeen = now, now
		return nil
	}, func(rec NodeRecord) AuditEvent {
		return AuditEvent{Type: EventNodeRegistered, KeyID: rec.JoinKeyID, Hostname: rec.Hostname, Actor: r.Source,
			Reason: fmt.Sprintf("%d GPUs, version %s", len(rec.GPUs), rec.Version)}
	})
	if errors.Is(err, ErrNodeNotFound) {
		return Node{}, ErrNodeTokenInvalid // released while we worked
	}
	return rec.Node, err
}

// ReportVersion records the version a node runs, authenticated by its token.
func (k *Keyring) ReportVersion(ctx context.Context, hostname, token, version string) (Node, error) {
	if err := checkVersionField(version); err != nil {
		return Node{}, err
	}
	if version == "" {
		return Node{}, fieldError("version", "is required")
	}
	now := k.now().UTC()
	var was string
	rec, err := k.changeNodeByHostname(ctx, hostname, func(rec *NodeRecord) error {
		if !tokenMatches(*rec, token) {
			return ErrNodeTokenInvalid
		}
		// A node being torn down reports nothing more: a write here
		// would change the record the teardown releases only unchanged.
		if rec.Status == StatusDisconnected {
			return fmt.Errorf("%w: %q is being disconnected", ErrNodeDisconnected, rec.Hostname)
		}
		was = rec.Version
		rec.Version, rec.UpdatedAt, rec.LastSeen = version, now, now
		return nil
	}, func(rec NodeRecord) AuditEvent {
		if was == version {
			return AuditEvent{} // the same version again: nothing to record
		}
		reason := "version " + version
		if was != "" {
			reason += " (was " + was + ")"
		}
		return AuditEvent{At: now, Type: EventVersionReported, KeyID: rec.JoinKeyID, Hostname: rec.Hostname, Actor: "node:" + rec.Hostname, Reason: reason}
	})
	if errors.Is(err, ErrNodeNotFound) {
		return Node{}, ErrNodeTokenInvalid
	}
	return rec.Node, err
}

// SetNodePodCIDR records the pod CIDR Kubernetes gave the node
// (Node.spec.podCIDR); an invalid (zero) prefix clears it. It is for the
// service, never for the node itself: in the mesh the prefix becomes a
// route to that node. A prefix that overlaps the VPN pool, one of
// Options.MasterPrefixes or another node's pod CIDR is refused with
// *PodCIDRConflictError.
func (k *Keyring) SetNodePodCIDR(ctx context.Context, hostname string, podCIDR netip.Prefix) (Node, error) {
	if podCIDR.IsValid() {
		if err := k.checkPodCIDR(podCIDR); err != nil {
			return Node{}, err
		}
	}
	now := k.now().UTC()
	rec, err := k.changeNodeByHostname(ctx, hostname, func(rec *NodeRecord) error {
		rec.PodCIDR = podCIDR
		rec.UpdatedAt = now
		return nil
	}, nil)
	return rec.Node, err
}

func (k *Keyring) checkPodCIDR(p netip.Prefix) error {
	if p.Masked() != p {
		return fieldError("pod_cidr", "%s has host bits set; did you mean %s?", p, p.Masked())
	}
	if pool := k.pool.Prefix(); pool.IsValid() && pool.Overlaps(p) {
		return &PodCIDRConflictError{PodCIDR: p, Overlaps: pool, What: "the VPN pool"}
	}
	for _, m := range *k.masterPrefixes.Load() {
		if m.Overlaps(p) {
			return &PodCIDRConflictError{PodCIDR: p, Overlaps: m, What: "the master's addresses"}
		}
	}
	return nil
}

// MarkDisconnected sets a node's status to disconnected, keeping its
// hostname and address (Release frees them).
func (k *Keyring) MarkDisconnected(ctx context.Context, hostname, actor string) (Node, error) {
	now := k.now().UTC()
	rec, err := k.changeNodeByHostname(ctx, hostname, func(rec *NodeRecord) error {
		rec.Status, rec.UpdatedAt = StatusDisconnected, now
		return nil
	}, func(rec NodeRecord) AuditEvent {
		return AuditEvent{Type: EventNodeDisconnected, KeyID: rec.JoinKeyID, Hostname: hostname, Actor: actor}
	})
	if err != nil {
		return Node{}, err
	}
	return rec.Node, nil
}

// Release removes a node from the ledger, freeing its hostname and VPN
// address for reuse. ErrNodeNotFound if there is no such node.
func (k *Keyring) Release(ctx context.Context, hostname, actor string) (Node, error) {
	return k.release(ctx, hostname, 0, actor, "")
}

// ReleaseIfUnchanged is Release of exactly the node n as it was read: it
// fails with ErrNodeChanged if the node was written since (for example,
// when a half-finished join registered after all). reason goes into the
// audit trail.
func (k *Keyring) ReleaseIfUnchanged(ctx context.Context, n Node, actor, reason string) (Node, error) {
	if n.Revision == 0 {
		return Node{}, errors.New("joinkeys: ReleaseIfUnchanged needs a node read from the ledger")
	}
	return k.release(ctx, n.Hostname, n.Revision, actor, reason)
}

// UndoJoin takes back a first join that failed after Join reserved its
// node (the mesh refused its peer, say): the node n, as Join returned it,
// is released if unchanged, and the use of its join key the reservation
// spent is given back, so that a key of few uses is not used up by a join
// that never happened. A re-join reserves nothing: it is not undone.
func (k *Keyring) UndoJoin(ctx context.Context, n Node, actor, reason string) error {
	if _, err := k.ReleaseIfUnchanged(ctx, n, actor, reason); err != nil {
		return err
	}
	if n.JoinKeyID == "" {
		return nil
	}
	if _, err := k.store.ReturnKeyUse(ctx, n.JoinKeyID); err != nil {
		return fmt.Errorf("joinkeys: node %s released, but giving back the use of key %s failed: %w", n.Hostname, n.JoinKeyID, err)
	}
	return nil
}

func (k *Keyring) release(ctx context.Context, hostname string, revision int64, actor, reason string) (Node, error) {
	if err := ValidateHostname(hostname); err != nil {
		return Node{}, err
	}
	rec, err := k.store.DeleteNode(ctx, hostname, revision, k.now().UTC())
	if err != nil {
		return Node{}, err
	}
	if reason != "" {
		reason += "; "
	}
	k.audit(ctx, AuditEvent{Type: EventNodeReleased, KeyID: rec.JoinKeyID, Hostname: hostname, Actor: actor,
		Reason: reason + "released " + rec.VPNIP.String()})
	k.log.InfoContext(ctx, "node released", "hostname", hostname, "vpn_ip", rec.VPNIP)
	return rec.Node, nil
}

// Node returns the node with hostname.
func (k *Keyring) Node(ctx context.Context, hostname string) (Node, error) {
	rec, err := k.store.Node(ctx, hostname)
	return rec.Node, err
}

// Nodes lists every node, ordered by hostname.
func (k *Keyring) Nodes(ctx context.Context) ([]Node, error) {
	recs, err := k.store.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	nodes := make([]Node, len(recs))
	for i, r := range recs {
		nodes[i] = r.Node
	}
	return nodes, nil
}

// GPUKinds counts the registered nodes with GPUs by kind of machine
// (vendor, model, GPUs per node), in no particular order, without reading
// the fleet.
func (k *Keyring) GPUKinds(ctx context.Context) ([]GPUKind, error) {
	return k.store.GPUKinds(ctx)
}

// NodesPage returns at most limit nodes whose hostnames sort after after
// ("" for the first page), ordered by hostname, and the hostname to pass
// as after for the next page ("" when this page is the last).
func (k *Keyring) NodesPage(ctx context.Context, after string, limit int) (nodes []Node, next string, err error) {
	if limit <= 0 {
		return nil, "", fieldError("limit", "must be positive, got %d", limit)
	}
	recs, err := k.store.NodesAfter(ctx, after, limit+1)
	if err != nil {
		return nil, "", err
	}
	if len(recs) > limit {
		recs = recs[:limit]
		next = recs[limit-1].Hostname
	}
	nodes = make([]Node, len(recs))
	for i, r := range recs {
		nodes[i] = r.Node
	}
	return nodes, next, nil
}

// ValidateHostname accepts an RFC 1123 label as Kubernetes does for node
// names here: 1-63 lowercase letters, digits and '-', starting and ending
// with a letter or digit.
func ValidateHostname(h string) error {
	if h == "" {
		return fieldError("hostname", "is required")
	}
	if len(h) > 63 {
		return fieldError("hostname", "%q is %d characters; a DNS-1123 label has at most 63", h, len(h))
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		alnum := (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')
		if !alnum && (c != '-' || i == 0 || i == len(h)-1) {
			return fieldError("hostname", "%q is not a DNS-1123 label: use lowercase letters, digits and '-', starting and ending with a letter or digit", h)
		}
	}
	return nil
}

// ParsePublicKey parses a WireGuard public key, naming the field on error.
func ParsePublicKey(s string) (wgkey.Key, error) {
	if s == "" {
		return wgkey.Key{}, fieldError("public_key", "is required")
	}
	k, err := wgkey.Parse(s)
	if err != nil {
		return wgkey.Key{}, fieldError("public_key", "%v", err)
	}
	if k.IsZero() {
		return wgkey.Key{}, fieldError("public_key", "is all zeros")
	}
	return k, nil
}

func checkVersionField(v string) error {
	if len(v) > 64 {
		return fieldError("version", "must be at most 64 bytes")
	}
	for _, r := range v {
		if r <= ' ' || r == 0x7f {
			return fieldError("version", "must not contain spaces or control characters")
		}
	}
	return nil
}

func validateGPUs(gpus []GPU) error {
	if len(gpus) > 64 {
		return fieldError("gpus", "at most 64 GPUs per node")
	}
	seen := map[int]bool{}
	for i, g := range gpus {
		if g.Index < 0 || seen[g.Index] {
			return fieldError(fmt.Sprintf("gpus[%d].index", i), "must be a distinct non-negative index")
		}
		seen[g.Index] = true
		if g.MemoryMiB < 0 {
			return fieldError(fmt.Sprintf("gpus[%d].memory_mib", i), "must not be negative")
		}
		if g.Vendor != "" && g.Vendor != VendorNVIDIA && g.Vendor != VendorAMD {
			return fieldError(fmt.Sprintf("gpus[%d].vendor", i), "must be %q or %q, got %q", VendorNVIDIA, VendorAMD, g.Vendor)
		}
		if len(g.Name) > 128 || len(g.UUID) > 128 {
			return fieldError(fmt.Sprintf("gpus[%d]", i), "name and uuid must be at most 128 bytes")
		}
	}
	return nil
}
