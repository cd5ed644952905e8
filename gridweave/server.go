package gridweave

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"gridweave.dev/gridweave/fleet"
	"gridweave.dev/gridweave/kubeletjoin"
	"gridweave.dev/gridweave/linkbook"
	"gridweave.dev/joinkeys"
	"gridweave.dev/mesh"
	"gridweave.dev/rayctl"
)

// Backends are what the service composes, each already behind a seam
// with an in-memory implementation (joinkeys/memstore, mesh/memmesh,
// KubeRay's and client-go's fake clientsets).
type Backends struct {
	// Keyring is the join keys and the node ledger. Required; its pool is
	// the VPN CIDR.
	Keyring *joinkeys.Keyring
	// Mesh is the master's WireGuard peers. Required.
	Mesh mesh.Mesh
	// Ray operates RayClusters. Required.
	Ray *rayctl.Client
	// Kube reads and deletes Kubernetes Nodes. Required.
	Kube kubernetes.Interface
	// Dynamic serves the CRD proxy (GridweaveJob, GridweaveEndpoint); nil
	// turns /v1/crd off (503).
	Dynamic dynamic.Interface
	// Routes routes nodes' pod CIDRs into the WireGuard device; nil
	// means none (an in-memory mesh).
	Routes fleet.Routes
	// Targets keeps each GPU node's DCGM scrape target (package
	// scrapetargets writes them as Prometheus file_sd files); nil means
	// none.
	Targets fleet.Targets
	// Links keeps the agents' reports of their links; default an
	// in-memory linkbook.Memory (with several replicas, a
	// linkbook.Follower, so that every replica answers the leader's).
	Links linkbook.Book
	// Serve, with several server replicas, hands this replica's writes
	// of Ray Serve's config to the leader's (ServeChannel); nil: this
	// server writes them itself.
	Serve *ServeChannel
	// Hub, if set, says where nodes reach the master's WireGuard device
	// now, as host:port: with several server replicas, the leader's. ""
	// (or a nil Hub) means this server's MasterIP:WireGuardPort. Validate and
	// the peer directory answer it.
	Hub func() string
	// Logger receives the access log and events; default discards.
	Logger *slog.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Server is the control-plane HTTP service. Build it with New and serve
// Handler (and, when Config.InternalAddr is set, InternalHandler).
type Server struct {
	cfg     Config
	keyring *joinkeys.Keyring
	mesh    mesh.Mesh
	ray     *rayctl.Client
	kube    kubernetes.Interface
	dynamic dynamic.Interface
	log     *slog.Logger
	now     func() time.Time
	hub     func() string

	auth    *authenticator
	limiter *rateLimiter
	metrics *metrics
	// approver is the kubelet join mode's; nil in the k3s mode.
	approver *kubeletjoin.Approver
	// fleet is the node lifecycle the join routes call.
	fleet *fleet.Service

	public   http.Handler
	internal http.Handler
	vpn      http.Handler

	nodes *nodeRoutes

	// The other groups of routes.
	kubetorch *kubetorchRoutes
	downloads *downloadRoutes
	clusters  *clusterRoutes
	crd       *crdRoutes
	pages     *pageRoutes
	serve     *serveRoutes

	openapiCache
	responder
}

// New checks cfg (Config.Check: unsafe secrets are refused outside dev
// mode) and returns the service over b.
func New(ctx context.Context, cfg Config, b Backends) (*Server, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	if b.Keyring == nil || b.Mesh == nil || b.Ray == nil || b.Kube == nil {
		return nil, errors.New("gridweave: Backends need a Keyring, a Mesh, a rayctl Client and a Kubernetes clientset")
	}
	if b.Keyring.Pool().Prefix() != cfg.VPNCIDR {
		return nil, &SettingError{Setting: "VPNCIDR", Err: fmt.Errorf("%s is not the Keyring's pool %s", cfg.VPNCIDR, b.Keyring.Pool().Prefix())}
	}
	if err := fleet.CheckVersion(cfg.ServerVersion); err != nil {
		return nil, &SettingError{Setting: "ServerVersion", Err: err}
	}
	// The limits and intervals a Config built by hand may leave zero take
	// DefaultConfig's values: one place holds the defaults.
	d := DefaultConfig()
	orDefault(&cfg.MaxBodyBytes, d.MaxBodyBytes)
	orDefault(&cfg.RateLimitPerMinute, d.RateLimitPerMinute)
	orDefault(&cfg.ValidatedTTL, d.ValidatedTTL)
	orDefault(&cfg.ReapInterval, d.ReapInterval)
	orDefault(&cfg.KubeTorchSyncInterval, d.KubeTorchSyncInterval)
	s := &Server{cfg: cfg, keyring: b.Keyring, mesh: b.Mesh, ray: b.Ray, kube: b.Kube, dynamic: b.Dynamic, log: b.Logger, now: b.Now, hub: b.Hub}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.responder = responder{log: s.log}
	if s.now == nil {
		s.now = time.Now
	}
	key, err := b.Mesh.PublicKey(ctx)
	if err != nil {
		return nil, fmt.Errorf("gridweave: the mesh's public key: %w", err)
	}
	s.nodes = &nodeRoutes{responder: s.responder, cfg: &s.cfg, keyring: b.Keyring, mesh: b.Mesh, kube: b.Kube, now: s.now, hub: b.Hub, masterKey: key, links: b.Links}
	if s.nodes.links == nil {
		s.nodes.links = new(linkbook.Memory)
	}
	s.nodes.k3sToken = strings.TrimSpace(cfg.K3sAgentToken)
	if cfg.KubeJoinMode == JoinModeKubelet {
		if err := s.kubeletMode(); err != nil {
			return nil, err
		}
	}
	s.auth = newAuthenticator(cfg, b.Keyring, s.now)
	s.limiter = newRateLimiter(cfg.RateLimitPerMinute, s.now)
	s.metrics = newMetrics(s)
	s.nodes.auth, s.nodes.metrics = s.auth, s.metrics
	marks, err := NodeMarker(cfg.JWTSecret)
	if err != nil {
		return nil, err
	}
	nodes := &fleet.KubeNodes{Client: b.Kube, Logger: s.log}
	if cfg.KubeJoinMode == JoinModeKubelet {
		// The machines' kubelets run pods: a disconnect drains the Node.
		nodes.DrainTimeout = cfg.KubeletDrainTimeout
	}
	fb := fleet.Backends{Ledger: b.Keyring, Peers: b.Mesh, Routes: b.Routes, Nodes: nodes,
		ServiceRanges: fleet.KubeServiceCIDRs{Client: b.Kube},
		Placement: &fleet.RayGroups{Ray: b.Ray, Kube: b.Kube, Ledger: b.Keyring, Nodes: nodes, Marks: marks, Namespace: cfg.Namespace, Cluster: cfg.ClusterName,
			HeadImage: cfg.RayImage, WorkerImage: cfg.RayImageWorker},
		Targets: b.Targets, Logger: s.log, Now: s.now}
	// The master's own prefixes; Run adds those of the cluster's Nodes
	// that are not the fleet's.
	masterPrefixes := []netip.Prefix{cfg.ServiceCIDR}
	if ip, err := netip.ParseAddr(cfg.MasterIP); err == nil {
		masterPrefixes = append(masterPrefixes, netip.PrefixFrom(ip, ip.BitLen()))
	}
	if s.fleet, err = fleet.New(fleet.Config{ServerVersion: cfg.ServerVersion, ValidatedTTL: cfg.ValidatedTTL, ReapInterval: cfg.ReapInterval,
		MasterPrefixes: masterPrefixes, ClusterCIDR: cfg.ClusterCIDR, NodeCIDRMaskBits: cfg.NodeCIDRMaskBits, Marks: marks}, fb); err != nil {
		return nil, err
	}
	s.nodes.fleet = s.fleet
	s.nodes.park = &pollPark{answer: s.nodes.answerPeers, refresh: s.nodes.peers.expire, log: s.log}
	s.downloads = &downloadRoutes{responder: s.responder, cfg: &s.cfg}
	s.pages = &pageRoutes{responder: s.responder, cfg: &s.cfg, openapi: s.OpenAPI}
	s.crd = newCRDRoutes(s.responder, &s.cfg, b.Ray, b.Dynamic)
	s.clusters = &clusterRoutes{responder: s.responder, cfg: &s.cfg, ray: b.Ray}
	s.kubetorch = newKubetorchRoutes(s.responder, &s.cfg, b.Ray, b.Dynamic)
	if s.serve, err = newServeRoutes(s.responder, &s.cfg, b.Serve); err != nil {
		return nil, err
	}
	s.public, s.internal, s.vpn = s.routes()
	return s, nil
}

// kubeletMode sets up the kubelet join mode: the cluster CA validate
// hands out, the bootstrap tokens it makes, the approver of the kubelets'
// certificates.
func (s *Server) kubeletMode() error {
	if block, _ := pem.Decode(s.cfg.KubeletCAPEM); block == nil || block.Type != "CERTIFICATE" {
		return &SettingError{Setting: "KubeletCAPEM", Err: errors.New("the kubelet join mode hands machines the cluster CA, and none was given: the CA's PEM certificate")}
	}
	s.nodes.kubeletTokens = &kubeletjoin.Tokens{Client: s.kube, TTL: s.cfg.KubeletTokenTTL, Now: s.now}
	s.approver = &kubeletjoin.Approver{Client: s.kube, Logger: s.log, Machine: func(ctx context.Context, hostname string) (kubeletjoin.Machine, bool, error) {
		n, err := s.keyring.Node(ctx, hostname)
		if errors.Is(err, joinkeys.ErrNodeNotFound) {
			return kubeletjoin.Machine{}, false, nil
		}
		if err != nil {
			return kubeletjoin.Machine{}, false, err
		}
		held := n.Status == joinkeys.StatusValidated || n.Status == joinkeys.StatusRegistered
		return kubeletjoin.Machine{Address: n.VPNIP, Binding: s.fleet.Marks().TokenBinding(n.PublicKey)}, held, nil
	}}
	return nil
}

// NodeMarker is the Marker of the nodes' ownership marks of a server
// with jwtSecret: its secret is derived from the JWT secret every replica
// shares (an HMAC under it, so neither reveals the other), so a node's
// mark is computable by the master alone. A new JWT secret makes new
// marks: the machines join again (the join command) to carry them.
func NodeMarker(jwtSecret string) (*fleet.Marker, error) {
	h := hmac.New(sha256.New, []byte(jwtSecret))
	h.Write([]byte("gridweave.dev/node ownership marks"))
	return fleet.NewMarker(h.Sum(nil))
}

// Fleet returns the node lifecycle the service's join routes call.
func (s *Server) Fleet() *fleet.Service { return s.fleet }

// Handler serves the public listener.
func (s *Server) Handler() http.Handler { return s.public }

// InternalHandler serves the internal listener (Config.InternalAddr):
// the internal routes without credentials, /metrics and KubeTorch
// bundles.
func (s *Server) InternalHandler() http.Handler { return s.internal }

// VPNHandler serves the VPN listener (Config.VPNURL, on MasterVPNIP):
// what joined nodes call through their tunnels (register,
// report-version, leave, the worker image) and the KubeTorch bundles
// their Ray workers fetch, plain HTTP since WireGuard authenticates and
// encrypts every packet there.
func (s *Server) VPNHandler() http.Handler { return s.vpn }

// Ready reports which backends, if any, do not answer: nil, or a
// *BackendsDownError naming them.
func (s *Server) Ready(ctx context.Context) error {
	down := &BackendsDownError{}
	check := func(name string, err error) {
		if err != nil {
			down.Backends = append(down.Backends, name)
			down.Errs = append(down.Errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	_, err := s.keyring.Keys(ctx)
	check("ledger", err)
	_, err = s.mesh.PublicKey(ctx)
	check("wireguard", err)
	_, err = s.kube.Discovery().ServerVersion()
	check("kubernetes", err)
	if len(down.Backends) == 0 {
		return nil
	}
	return down
}

// orDefault sets *v to def when it is not positive.
func orDefault[T int | int64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// BackendsDownError is Ready's answer when backends do not answer:
// their names (ledger, wireguard, kubernetes) and each one's error.
type BackendsDownError struct {
	Backends []string
	Errs     []error
}

func (e *BackendsDownError) Error() string { return errors.Join(e.Errs...).Error() }

// Unwrap gives each backend's error.
func (e *BackendsDownError) Unwrap() []error { return e.Errs }
