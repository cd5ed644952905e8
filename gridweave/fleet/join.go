package fleet

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"gridweave.dev/joinkeys"
	"gridweave.dev/mesh"
	"gridweave.dev/mesh/kernelroutes"
	"gridweave.dev/mesh/wgkey"
)

// reservedHostnames are the route names under /v1/nodes/: a node named
// like one would shadow it in GET /v1/nodes/{hostname}.
var reservedHostnames = map[string]bool{
	"join-keys": true, "validate": true, "register": true, "disconnect": true, "leave": true,
	"verify-provider": true, "report-version": true, "worker-image": true, "agent": true,
	"peers": true, "links": true, "history": true,
}

// CheckHostname reports whether h may name a node: a DNS-1123 label (as
// joinkeys.ValidateHostname) that is not a route name under /v1/nodes/.
func CheckHostname(h string) error {
	if err := joinkeys.ValidateHostname(h); err != nil {
		return err
	}
	if reservedHostnames[h] {
		return invalid("hostname", "%q is the name of a route under /v1/nodes/; choose another hostname", h)
	}
	return nil
}

// ValidateRequest is join step 1. A first join presents Key; a re-join
// of the same public key presents NodeToken.
type ValidateRequest struct {
	Key       string
	NodeToken string
	Hostname  string
	PublicKey string
	Version   string
	// Source is where the request came from, for the audit log.
	Source string
	// Admit, when set, makes what the admitted node needs beyond its
	// reservation and peer (the kubelet join mode's bootstrap token). It
	// runs last, under the hostname's lock, so nothing is made for a
	// request Validate refuses; when it fails, a first join is undone
	// (its peer, its reservation and its key's use) and Validate answers
	// Admit's error.
	Admit func(ctx context.Context, node joinkeys.Node) error
}

// Validated is an admitted node: its reserved address, and the token
// that proves its identity from now on.
type Validated struct {
	Node      joinkeys.Node
	NodeToken string
	Rejoined  bool
}

// Validate admits a node: it checks the credential, then the fields,
// reserves the node's VPN address in the ledger and adds its WireGuard
// peer, so the tunnel is up the moment the node brings up its device.
func (s *Service) Validate(ctx context.Context, req ValidateRequest) (Validated, error) {
	if err := s.CheckValidate(ctx, req); err != nil {
		return Validated{}, err
	}
	unlock, err := s.locks.Lock(ctx, req.Hostname)
	if err != nil {
		return Validated{}, err
	}
	defer unlock()
	if req.NodeToken == "" {
		if err := s.checkNotForeign(ctx, req.Hostname); err != nil {
			return Validated{}, err
		}
	}
	res, err := s.ledger.Join(ctx, joinkeys.JoinRequest{Key: req.Key, NodeToken: req.NodeToken, Hostname: req.Hostname,
		PublicKey: req.PublicKey, Version: req.Version, Source: req.Source})
	if err != nil {
		return Validated{}, err
	}
	// If the mesh refuses a first join, the reservation is undone, with
	// the key's use: no ledger row without a peer.
	if err := s.peers.UpsertPeer(ctx, s.PeerOf(res.Node)); err != nil {
		if !res.Rejoined {
			s.undoFirstJoin(ctx, res.Node, false, "the mesh refused the peer")
		}
		return Validated{}, err
	}
	if req.Admit != nil {
		if err := req.Admit(ctx, res.Node); err != nil {
			if !res.Rejoined {
				s.undoFirstJoin(ctx, res.Node, true, "what the node needs to join could not be made")
			}
			return Validated{}, err
		}
	}
	return Validated{Node: res.Node, NodeToken: res.NodeToken, Rejoined: res.Rejoined}, nil
}

// undoFirstJoin undoes a first join Validate reserved and then refused
// for reason: its peer when withPeer, then its reservation with its
// key's use. What cannot be undone is logged; a peer left behind is
// removed by the next reconciliation, which finds no ledger row for it.
func (s *Service) undoFirstJoin(ctx context.Context, node joinkeys.Node, withPeer bool, reason string) {
	ctx = context.WithoutCancel(ctx)
	if withPeer {
		if err := s.peers.RemovePeer(ctx, node.PublicKey); err != nil && !errors.Is(err, mesh.ErrPeerNotFound) {
			s.log.Error("removing the peer of a refused join", "hostname", node.Hostname, "err", err)
		}
	}
	if err := s.ledger.UndoJoin(ctx, node, "gridweave", reason); err != nil {
		s.log.Error("undoing a refused join's reservation", "hostname", node.Hostname, "reason", reason, "err", err)
	}
}

// CheckValidate is what Validate checks of a request before it reserves
// anything, in the same order: the credential (a usable join key, not an
// exhausted one, or the hostname's node token), the hostname, the public
// key and the version: a caller can refuse early, without the hostname's
// lock, a request Validate would refuse.
func (s *Service) CheckValidate(ctx context.Context, req ValidateRequest) error {
	if err := s.authenticate(ctx, req.Key, req.NodeToken, req.Hostname, "key"); err != nil {
		return err
	}
	if err := CheckHostname(req.Hostname); err != nil {
		return err
	}
	if _, err := joinkeys.ParsePublicKey(req.PublicKey); err != nil {
		return err
	}
	return versionGate(s.cfg.ServerVersion, req.Version)
}

// Authenticate checks a join-flow credential as Validate and Register
// check it before anything else of the request: a node token for
// hostname, else a join key that may be used (or exhausted: its last use
// may have admitted the node that registers). No credential is
// ErrCredentialRequired.
func (s *Service) Authenticate(ctx context.Context, key, nodeToken, hostname string) error {
	return s.authenticateAllowing(ctx, key, nodeToken, hostname, "key", true)
}

// authenticate checks a join-flow credential before anything else of the
// request: a node token for hostname, else a usable join key (an
// exhausted one too when allowExhausted, for the register that completes
// the join the key's last use admitted). field names the key's field.
func (s *Service) authenticate(ctx context.Context, key, nodeToken, hostname, field string) error {
	return s.authenticateAllowing(ctx, key, nodeToken, hostname, field, false)
}

func (s *Service) authenticateAllowing(ctx context.Context, key, nodeToken, hostname, field string, allowExhausted bool) error {
	switch {
	case nodeToken != "":
		_, err := s.authenticateNode(ctx, hostname, nodeToken)
		return err
	case key != "":
		_, err := s.ledger.Check(ctx, key)
		if allowExhausted && errors.Is(err, joinkeys.ErrKeyExhausted) {
			return nil
		}
		return err
	}
	return &Error{Kind: ErrCredentialRequired, Field: field,
		Message: "a join key (key) is required for a first join; a node that joined before presents its node_token"}
}

// authenticateNode returns the node whose token token is. A hostname that
// names no node, or is not a hostname at all, is the same
// joinkeys.ErrNodeTokenInvalid as a wrong token: the pair is the
// credential.
func (s *Service) authenticateNode(ctx context.Context, hostname, token string) (joinkeys.Node, error) {
	if joinkeys.ValidateHostname(hostname) != nil {
		return joinkeys.Node{}, joinkeys.ErrNodeTokenInvalid
	}
	return s.ledger.AuthenticateNode(ctx, hostname, token)
}

// PeerOf is the WireGuard peer of a node: its VPN address, and its pod
// CIDR once Kubernetes gave it one, when that lies in the cluster's pod
// range (a ledger written before the range was set may hold one that
// does not: it is left out).
func (s *Service) PeerOf(n joinkeys.Node) mesh.Peer {
	allowed := []netip.Prefix{netip.PrefixFrom(n.VPNIP, 32)}
	if n.PodCIDR.IsValid() && s.CheckPodCIDR(n.PodCIDR) == nil {
		allowed = append(allowed, n.PodCIDR)
	}
	return mesh.Peer{PublicKey: n.PublicKey, AllowedIPs: allowed}
}

// RegisterRequest is join step 2, after the node's tunnel is up. Key
// (with the PublicKey validate reserved under it) only completes a
// reservation still validated; every later register presents NodeToken.
type RegisterRequest struct {
	Key       string
	NodeToken string
	Hostname  string
	PublicKey string
	Version   string
	// GPUs are the node's GPUs; none for a CPU-only node. A GPU without a
	// vendor is NVIDIA's.
	GPUs   []joinkeys.GPU
	Source string
}

// Registered is a registered node and the worker group it runs a Ray
// worker of ("" for a CPU-only node).
type Registered struct {
	Node        joinkeys.Node
	WorkerGroup string
}

// Register completes a join: the ledger records the node as registered
// with its GPUs, its peer gets its pod CIDR (from Kubernetes, never from
// the node) and the route to it, a GPU node joins its pool's worker
// group and gets its scrape target. On return a GPU node is counted in
// its group.
func (s *Service) Register(ctx context.Context, req RegisterRequest) (Registered, error) {
	if err := s.authenticateAllowing(ctx, req.Key, req.NodeToken, req.Hostname, "node_token", true); err != nil {
		return Registered{}, err
	}
	if err := CheckHostname(req.Hostname); err != nil {
		return Registered{}, err
	}
	var pub wgkey.Key
	if req.NodeToken == "" || req.PublicKey != "" {
		var err error
		if pub, err = joinkeys.ParsePublicKey(req.PublicKey); err != nil {
			return Registered{}, err
		}
	}
	gpus, err := checkGPUs(req.GPUs)
	if err != nil {
		return Registered{}, err
	}
	if err := versionGate(s.cfg.ServerVersion, req.Version); err != nil {
		return Registered{}, err
	}
	unlock, err := s.locks.Lock(ctx, req.Hostname)
	if err != nil {
		return Registered{}, err
	}
	defer unlock()
	if req.NodeToken != "" {
		n, err := s.authenticateNode(ctx, req.Hostname, req.NodeToken)
		if err != nil {
			return Registered{}, err
		}
		if req.PublicKey != "" && pub != n.PublicKey {
			return Registered{}, &Error{Kind: ErrPublicKeyMismatch, Field: "public_key",
				Message: "this node joined with another WireGuard public key; a new key means a new machine: have an administrator disconnect the node, then join again"}
		}
	}
	before, err := s.ledger.Node(ctx, req.Hostname)
	if err != nil {
		return Registered{}, err
	}
	// One that overlaps anything is refused before the node counts as
	// registered.
	if before.Status != joinkeys.StatusDisconnected {
		if before, err = s.syncPodCIDR(ctx, before); err != nil {
			return Registered{}, err
		}
	}
	node, err := s.ledger.Register(ctx, joinkeys.Registration{NodeToken: req.NodeToken, Key: req.Key, Hostname: req.Hostname,
		PublicKey: req.PublicKey, Version: req.Version, GPUs: gpus, Source: req.Source})
	if err != nil {
		return Registered{}, err
	}
	if err := s.peers.UpsertPeer(ctx, s.PeerOf(node)); err != nil {
		return Registered{}, err
	}
	if err := s.route(ctx, node.PodCIDR); err != nil {
		return Registered{}, err
	}
	var group string
	if s.placement != nil {
		if group, err = s.placement.Place(ctx, before, node); err != nil {
			return Registered{}, err
		}
	}
	if err := s.syncScrapeTarget(ctx, node); err != nil {
		return Registered{}, err
	}
	return Registered{Node: node, WorkerGroup: group}, nil
}

// checkGPUs checks a node's GPU list: one vendor for all (none given is
// NVIDIA's), a name for each.
func checkGPUs(in []joinkeys.GPU) ([]joinkeys.GPU, error) {
	gpus := make([]joinkeys.GPU, len(in))
	for i, g := range in {
		field := fmt.Sprintf("gpus[%d]", i)
		switch g.Vendor {
		case joinkeys.VendorNVIDIA, joinkeys.VendorAMD:
		case "":
			g.Vendor = joinkeys.VendorNVIDIA
		default:
			return nil, invalid(field+".vendor", "vendor must be %q or %q, got %q", joinkeys.VendorNVIDIA, joinkeys.VendorAMD, g.Vendor)
		}
		if g.Name == "" {
			return nil, invalid(field+".name", "name is required: the GPU's model as the vendor's tool reports it")
		}
		if i > 0 && g.Vendor != gpus[0].Vendor {
			return nil, invalid(field+".vendor", "all GPUs of a node must be of one vendor (%s and %s reported)", gpus[0].Vendor, g.Vendor)
		}
		gpus[i] = g
	}
	return gpus, nil
}

// syncPodCIDR records the pod CIDR Kubernetes gave the node, if it has
// one and it changed.
func (s *Service) syncPodCIDR(ctx context.Context, n joinkeys.Node) (joinkeys.Node, error) {
	if synced, ok := s.nodes.(interface{ Synced() bool }); ok && !synced.Synced() {
		// Run's watch has not listed every Node yet, so the pod CIDRs
		// this one must not overlap are not all known: the watch records
		// it once they are.
		return n, nil
	}
	kn, found, err := s.ownedNode(ctx, n)
	if err != nil || !found {
		return n, err // none yet (k3s registers it after the tunnel), or not its own
	}
	if err := s.observeForeign(ctx, n.Hostname, nil); err != nil { // its own, whatever the watch saw first
		return n, err
	}
	if !kn.PodCIDR.IsValid() || kn.PodCIDR == n.PodCIDR {
		return n, nil
	}
	if err := s.CheckPodCIDR(kn.PodCIDR); err != nil {
		s.log.WarnContext(ctx, "a Node's pod CIDR refused", "hostname", n.Hostname, "pod_cidr", kn.PodCIDR, "err", err)
		return n, err
	}
	if err := s.readServiceRanges(ctx); err != nil {
		return n, err
	}
	return s.ledger.SetNodePodCIDR(ctx, n.Hostname, kn.PodCIDR)
}

// route routes a node's pod CIDR into the device; one outside the
// cluster's pod range never is. A prefix the master routes to its own
// networks is left so (kernelroutes.ErrRouteNotOwned) and said in the
// log: the node's pods are not reached through the tunnel then, and
// nothing of the master's is taken from it.
func (s *Service) route(ctx context.Context, pod netip.Prefix) error {
	if s.routes == nil || !pod.IsValid() || s.CheckPodCIDR(pod) != nil {
		return nil
	}
	err := s.routes.Replace(ctx, pod)
	if errors.Is(err, kernelroutes.ErrRouteNotOwned) {
		s.log.WarnContext(ctx, "a node's pod CIDR is routed to the master's own networks: not routed into the tunnel", "pod_cidr", pod, "err", err)
		return nil
	}
	return err
}

func (s *Service) unroute(ctx context.Context, pod netip.Prefix) error {
	if s.routes == nil || !pod.IsValid() {
		return nil
	}
	return s.routes.Delete(ctx, pod)
}
