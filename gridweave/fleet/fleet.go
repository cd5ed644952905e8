package fleet

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"

	"gridweave.dev/internal/keyedlock"
	"gridweave.dev/joinkeys"
	"gridweave.dev/mesh"
)

// Config is what the fleet needs to know of the server it runs in.
type Config struct {
	// ServerVersion is the server's semantic version; nodes of another
	// major version are refused (*VersionMismatchError). Required.
	ServerVersion string
	// ValidatedTTL is how long a validated node may take to register
	// before its reservation is released; default 10 minutes.
	ValidatedTTL time.Duration
	// ReapInterval is how often Run looks for such nodes; default a minute.
	ReapInterval time.Duration
	// MasterPrefixes are addresses the master routes itself (its underlay
	// address, the cluster's service CIDR). With the pod CIDRs and
	// InternalIPs of the cluster's Nodes that are not the fleet's, which
	// Run follows, they are the ledger's master prefixes: no node's pod
	// CIDR may overlap them (joinkeys.Keyring.SetMasterPrefixes). The
	// ledger's own Options.MasterPrefixes stay among them.
	MasterPrefixes []netip.Prefix
	// ClusterCIDR is the cluster's pod range: a node's pod CIDR is
	// recorded, routed and allowed into its peer only when it lies inside
	// it and is no larger than a /NodeCIDRMaskBits (joinkeys.PodRange).
	// Default 10.42.0.0/16 (k3s's --cluster-cidr); NodeCIDRMaskBits
	// default 24, at least ClusterCIDR's own length.
	ClusterCIDR      netip.Prefix
	NodeCIDRMaskBits int
	// Marks makes and checks the ownership marks of the nodes' Kubernetes
	// Nodes (MarkLabel). Required: every replica of a server uses one
	// secret.
	Marks *Marker
}

// Backends are the fleet's dependencies. Ledger and Peers are required;
// a nil Routes, Placement or Targets turns that part off (no pod-CIDR
// routes, no worker groups, no scrape targets), and a nil Nodes means
// there is no Kubernetes to read pod CIDRs from or write Nodes to.
type Backends struct {
	Ledger *joinkeys.Keyring
	Peers  mesh.Mesh
	Routes Routes
	Nodes  Nodes
	// ServiceRanges are the cluster's Service ranges, read before a pod
	// CIDR is recorded (cached for minutes); nil: only
	// Config.MasterPrefixes.
	ServiceRanges ServiceRanges
	Placement     Placement
	Targets       Targets
	// Logger receives the fleet's events; default discards.
	Logger *slog.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Service is the node lifecycle: it admits nodes (Validate, Register),
// takes them out (Leave, Disconnect), records their versions
// (ReportVersion), and keeps the master's peers, routes, worker groups,
// scrape targets and Kubernetes Nodes in step with the ledger (Run).
// Its methods are safe for concurrent use; the work on one hostname is
// serialised, so a teardown and a re-join of the same node never
// interleave.
type Service struct {
	cfg       Config
	marks     *Marker
	podRange  joinkeys.PodRange
	ledger    *joinkeys.Keyring
	peers     mesh.Mesh
	routes    Routes
	nodes     Nodes
	placement Placement
	targets   Targets
	log       *slog.Logger
	now       func() time.Time
	locks     keyedlock.Locks

	// parked are the Node events Run's watch heard while the Node's
	// hostname was locked (a teardown drains it, a join registers it),
	// by name, the latest of each: synced once the lock is free.
	parkedMu sync.Mutex
	parked   map[string]KubeNode

	// The master's prefixes: staticPrefixes, and the prefixes of every
	// Kubernetes Node that is not the fleet's, by name.
	staticPrefixes []netip.Prefix
	services       ServiceRanges
	foreignMu      sync.Mutex
	foreign        map[string][]netip.Prefix
	serviceRanges  []netip.Prefix
	servicesRead   time.Time

	// followed is what FollowLedger last wrote as each node's scrape
	// target ("" for none), so that it writes only what changed.
	followMu sync.Mutex
	followed map[string]string
}

// New returns the fleet over b.
func New(cfg Config, b Backends) (*Service, error) {
	if b.Ledger == nil || b.Peers == nil {
		return nil, errors.New("fleet: Backends need a Ledger and Peers")
	}
	if err := CheckVersion(cfg.ServerVersion); err != nil {
		return nil, fmt.Errorf("fleet: Config.ServerVersion: %w", err)
	}
	if cfg.ValidatedTTL <= 0 {
		cfg.ValidatedTTL = 10 * time.Minute
	}
	if cfg.ReapInterval <= 0 {
		cfg.ReapInterval = time.Minute
	}
	if !cfg.ClusterCIDR.IsValid() {
		cfg.ClusterCIDR = joinkeys.DefaultPodRange.Cluster
	}
	if cfg.NodeCIDRMaskBits == 0 {
		cfg.NodeCIDRMaskBits = max(joinkeys.DefaultPodRange.NodeBits, cfg.ClusterCIDR.Bits())
	}
	podRange := joinkeys.PodRange{Cluster: cfg.ClusterCIDR, NodeBits: cfg.NodeCIDRMaskBits}
	if err := podRange.Validate(); err != nil {
		return nil, fmt.Errorf("fleet: Config.ClusterCIDR: %w", err)
	}
	if cfg.Marks == nil {
		return nil, errors.New("fleet: Config needs Marks (NewMarker)")
	}
	s := &Service{cfg: cfg, marks: cfg.Marks, podRange: podRange, ledger: b.Ledger, peers: b.Peers, routes: b.Routes, nodes: b.Nodes,
		placement: b.Placement, targets: b.Targets, services: b.ServiceRanges, log: b.Logger, now: b.Now}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.staticPrefixes = append(slices.Clone(cfg.MasterPrefixes), b.Ledger.MasterPrefixes()...)
	if err := s.ledger.SetMasterPrefixes(s.staticPrefixes); err != nil {
		return nil, fmt.Errorf("fleet: Config.MasterPrefixes: %w", err)
	}
	return s, nil
}

// Marks returns the Marker of the nodes' ownership marks.
func (s *Service) Marks() *Marker { return s.marks }

// PodRange returns the cluster's pod range.
func (s *Service) PodRange() joinkeys.PodRange { return s.podRange }

// CheckPodCIDR reports whether p may be a node's pod CIDR: a prefix
// without host bits inside Config.ClusterCIDR, no larger than
// /Config.NodeCIDRMaskBits (*Error of ErrPodCIDROutsideCluster
// otherwise). Whatever a Kubernetes Node says of itself is checked by it
// before it is recorded, routed or allowed into a peer.
func (s *Service) CheckPodCIDR(p netip.Prefix) error {
	if err := s.podRange.Check(p); err != nil {
		return &Error{Kind: ErrPodCIDROutsideCluster, Field: "pod_cidr",
			Message: err.Error() + ": a Node's pod CIDR is a node's prefix of the cluster's pod range (its range and the length of a node's prefix, the master's settings)"}
	}
	return nil
}

// Ledger returns the fleet's ledger.
func (s *Service) Ledger() *joinkeys.Keyring { return s.ledger }
