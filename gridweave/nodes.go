package gridweave

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"gridweave.dev/gridweave/scrapetargets"
	"gridweave.dev/joinkeys"
	"gridweave.dev/mesh"
)

// reservedHostnames are the route names under /v1/nodes/: a node named
// like one would shadow it in GET /v1/nodes/{hostname}.
var reservedHostnames = map[string]bool{
	"join-keys": true, "validate": true, "register": true, "disconnect": true, "leave": true,
	"verify-provider": true, "report-version": true, "worker-image": true, "agent": true,
}

func checkHostname(h string) error {
	if err := joinkeys.ValidateHostname(h); err != nil {
		return err
	}
	if reservedHostnames[h] {
		return badField("hostname", "%q is the name of a route under /v1/nodes/; choose another hostname", h)
	}
	return nil
}

// nodeView is a node on the wire; every field is always present.
type nodeView struct {
	Hostname     string         `json:"hostname"`
	PublicKey    string         `json:"public_key"`
	VPNIP        string         `json:"vpn_ip"`
	Org          string         `json:"org"`
	JoinKeyID    string         `json:"join_key_id"`
	Version      string         `json:"version"`
	Status       string         `json:"status"`
	GPUs         []joinkeys.GPU `json:"gpus"`
	PodCIDR      *string        `json:"pod_cidr"`
	CreatedAt    time.Time      `json:"created_at"`
	UpdatedAt    time.Time      `json:"updated_at"`
	RegisteredAt *time.Time     `json:"registered_at"`
	LastSeen     *time.Time     `json:"last_seen"`
}

func viewNode(n joinkeys.Node) nodeView {
	v := nodeView{
		Hostname: n.Hostname, PublicKey: n.PublicKey.String(), VPNIP: n.VPNIP.String(), Org: n.Org,
		JoinKeyID: n.JoinKeyID, Version: n.Version, Status: string(n.Status), GPUs: n.GPUs,
		CreatedAt: n.CreatedAt, UpdatedAt: n.UpdatedAt, RegisteredAt: timeOrNil(n.RegisteredAt), LastSeen: timeOrNil(n.LastSeen),
	}
	if v.GPUs == nil {
		v.GPUs = []joinkeys.GPU{}
	}
	if n.PodCIDR.IsValid() {
		p := n.PodCIDR.String()
		v.PodCIDR = &p
	}
	return v
}

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// ---- join keys

type mintRequest struct {
	Kind       string            `json:"kind"`
	Org        string            `json:"org"`
	TTLSeconds *int64            `json:"ttl_seconds"`
	Provider   string            `json:"provider"`
	MaxUses    int               `json:"max_uses"`
	Labels     map[string]string `json:"labels"`
}

type mintResponse struct {
	ID          string    `json:"id"`
	Key         string    `json:"key"`
	Kind        string    `json:"kind"`
	Org         string    `json:"org"`
	Provider    *string   `json:"provider"`
	ExpiresAt   time.Time `json:"expires_at"`
	JoinCommand string    `json:"join_command"`
}

type keyView struct {
	ID        string            `json:"id"`
	Kind      string            `json:"kind"`
	Org       string            `json:"org"`
	Provider  *string           `json:"provider"`
	Labels    map[string]string `json:"labels"`
	CreatedBy string            `json:"created_by"`
	CreatedAt time.Time         `json:"created_at"`
	ExpiresAt time.Time         `json:"expires_at"`
	MaxUses   int               `json:"max_uses"`
	Uses      int               `json:"uses"`
	Revoked   bool              `json:"revoked"`
	RevokedAt *time.Time        `json:"revoked_at"`
	LastUsed  *time.Time        `json:"last_used_at"`
}

func viewKey(k joinkeys.Key) keyView {
	v := keyView{ID: k.ID, Kind: string(k.Kind), Org: k.Org, Labels: k.Labels, CreatedBy: k.CreatedBy, CreatedAt: k.CreatedAt,
		ExpiresAt: k.ExpiresAt, MaxUses: k.MaxUses, Uses: k.Uses, Revoked: k.Revoked(), RevokedAt: timeOrNil(k.RevokedAt), LastUsed: timeOrNil(k.LastUsed)}
	if k.Kind == joinkeys.KindProvider {
		v.Provider = &k.Provider
	}
	if v.Labels == nil {
		v.Labels = map[string]string{}
	}
	return v
}

// joinCommand is what a person pastes on the node.
func (s *Server) joinCommand(key string) string {
	master := s.cfg.MasterIP
	if master == "" {
		master = "<MASTER_IP>"
	}
	base := fmt.Sprintf("http://%s:%d", hostForURL(master), s.cfg.Port)
	return fmt.Sprintf("curl -fsSL %s/join-node.sh -o join-node.sh && sudo MASTER_IP=%s bash join-node.sh %s", base, master, key)
}

func hostForURL(host string) string {
	if a, err := netip.ParseAddr(host); err == nil && a.Is6() {
		return "[" + host + "]"
	}
	return host
}

func (s *Server) handleMintKey(w http.ResponseWriter, r *http.Request) {
	var req mintRequest
	if err := decodeJSON(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.TTLSeconds == nil {
		s.writeError(w, r, badField("ttl_seconds", "ttl_seconds is required: the key's lifetime in seconds"))
		return
	}
	if *req.TTLSeconds <= 0 {
		s.writeError(w, r, badField("ttl_seconds", "ttl_seconds must be positive, got %d", *req.TTLSeconds))
		return
	}
	if *req.TTLSeconds > int64(100*365*24*3600) {
		s.writeError(w, r, badField("ttl_seconds", "ttl_seconds is too large"))
		return
	}
	kind := joinkeys.Kind(req.Kind)
	if kind == joinkeys.KindProvider && req.Provider == "" {
		req.Provider = req.Org
	}
	p, _ := PrincipalFrom(r.Context())
	m, err := s.keyring.Mint(r.Context(), joinkeys.MintRequest{
		Kind: kind, Org: req.Org, Provider: req.Provider, TTL: time.Duration(*req.TTLSeconds) * time.Second,
		MaxUses: req.MaxUses, Labels: req.Labels, CreatedBy: p.Subject,
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	resp := mintResponse{ID: m.ID, Key: m.Secret, Kind: string(m.Kind), Org: m.Org, ExpiresAt: m.ExpiresAt, JoinCommand: s.joinCommand(m.Secret)}
	if m.Kind == joinkeys.KindProvider {
		resp.Provider = &m.Provider
	}
	writeJSON(w, http.StatusCreated, resp)
}

func (s *Server) handleListKeys(w http.ResponseWriter, r *http.Request) {
	keys, err := s.keyring.Keys(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	views := make([]keyView, len(keys))
	for i, k := range keys {
		views[i] = viewKey(k)
	}
	writeJSON(w, http.StatusOK, map[string]any{"keys": views})
}

func (s *Server) handleRevokeKey(w http.ResponseWriter, r *http.Request) {
	p, _ := PrincipalFrom(r.Context())
	k, err := s.keyring.Revoke(r.Context(), r.PathValue("id"), p.Subject)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, viewKey(k))
}

// ---- validate

type validateRequest struct {
	Key       string `json:"key"`
	Hostname  string `json:"hostname"`
	PublicKey string `json:"public_key"`
	Version   string `json:"version"`
	NodeToken string `json:"node_token"`
}

type validateResponse struct {
	VPNIP           string `json:"vpn_ip"`
	MasterVPNIP     string `json:"master_vpn_ip"`
	VPNCIDR         string `json:"vpn_cidr"`
	MasterPublicKey string `json:"master_public_key"`
	MasterEndpoint  string `json:"master_endpoint"`
	K3sURL          string `json:"k3s_url"`
	K3sToken        string `json:"k3s_token"`
	NodeToken       string `json:"node_token"`
}

func (s *Server) masterEndpoint() string {
	if s.cfg.MasterIP == "" {
		return ""
	}
	return fmt.Sprintf("%s:%d", hostForURL(s.cfg.MasterIP), s.cfg.WireGuardPort)
}

// joinStep is a join-flow handler: it decodes the body into a Req, runs
// the step (which writes the answer), counts the outcome in the metrics
// and answers an error in the contract's shape.
func joinStep[Req any](s *Server, step string, run func(ctx context.Context, source string, req Req, w http.ResponseWriter) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req Req
		err := decodeJSON(r, &req)
		if err == nil {
			err = run(r.Context(), clientIP(r), req, w)
		}
		s.metrics.join(step, err)
		if err != nil {
			s.writeError(w, r, err)
		}
	}
}

func (s *Server) handleValidate(w http.ResponseWriter, r *http.Request) {
	joinStep(s, "validate", s.validate)(w, r)
}

func (s *Server) validate(ctx context.Context, source string, req validateRequest, w http.ResponseWriter) error {
	if err := checkHostname(req.Hostname); err != nil {
		return err
	}
	if _, err := joinkeys.ParsePublicKey(req.PublicKey); err != nil {
		return err
	}
	if req.Key == "" && req.NodeToken == "" {
		return &apiError{status: 401, code: "unauthenticated", field: "key", message: "key (a join key) is required for a first join; a re-join presents node_token"}
	}
	unlock, err := s.nodeLocks.Lock(ctx, req.Hostname)
	if err != nil {
		return err
	}
	defer unlock()
	// Credentials before the version gate, so that a stranger learns
	// nothing of the server; the Keyring checks them again as it reserves.
	if req.NodeToken != "" {
		if _, err := s.keyring.AuthenticateNode(ctx, req.Hostname, req.NodeToken); err != nil {
			return err
		}
	} else if _, err := s.keyring.Check(ctx, req.Key); err != nil {
		return err
	}
	if err := versionGate(s.cfg.ServerVersion, req.Version); err != nil {
		return err
	}
	res, err := s.keyring.Join(ctx, joinkeys.JoinRequest{Key: req.Key, NodeToken: req.NodeToken, Hostname: req.Hostname,
		PublicKey: req.PublicKey, Version: req.Version, Source: source})
	if err != nil {
		return err
	}
	// The peer goes in eagerly, so the tunnel is up the moment the node
	// brings up its device. If the mesh refuses a first join, the
	// reservation is undone: no ledger row without a peer.
	if err := s.mesh.UpsertPeer(ctx, s.peerOf(res.Node)); err != nil {
		if !res.Rejoined {
			if _, undoErr := s.keyring.ReleaseIfUnchanged(context.WithoutCancel(ctx), res.Node, "gridweave", "the mesh refused the peer"); undoErr != nil {
				s.log.Error("undoing a reservation the mesh refused", "hostname", res.Node.Hostname, "err", undoErr)
			}
		}
		return err
	}
	writeJSON(w, http.StatusOK, validateResponse{
		VPNIP: res.Node.VPNIP.String(), MasterVPNIP: s.cfg.MasterVPNIP.String(), VPNCIDR: s.cfg.VPNCIDR.String(),
		MasterPublicKey: s.masterKey.String(), MasterEndpoint: s.masterEndpoint(), K3sURL: s.cfg.K3sURL,
		K3sToken: s.k3sToken, NodeToken: res.NodeToken,
	})
	return nil
}

// peerOf is the WireGuard peer of a node: its VPN address, and its pod
// CIDR once Kubernetes gave it one.
func (s *Server) peerOf(n joinkeys.Node) mesh.Peer {
	allowed := []netip.Prefix{netip.PrefixFrom(n.VPNIP, 32)}
	if n.PodCIDR.IsValid() {
		allowed = append(allowed, n.PodCIDR)
	}
	return mesh.Peer{PublicKey: n.PublicKey, AllowedIPs: allowed}
}

// ---- register

type gpuReport struct {
	Index     int    `json:"index"`
	Vendor    string `json:"vendor"`
	Name      string `json:"name"`
	MemoryMiB int    `json:"memory_mib"`
	UUID      string `json:"uuid"`
}

type registerRequest struct {
	Key       string      `json:"key"`
	NodeToken string      `json:"node_token"`
	Hostname  string      `json:"hostname"`
	PublicKey string      `json:"public_key"`
	Version   string      `json:"version"`
	GPUs      []gpuReport `json:"gpus"`
}

type registerResponse struct {
	Node        nodeView `json:"node"`
	WorkerGroup *string  `json:"worker_group"`
}

func (s *Server) handleRegister(w http.ResponseWriter, r *http.Request) {
	joinStep(s, "register", s.register)(w, r)
}

func (s *Server) register(ctx context.Context, source string, req registerRequest, w http.ResponseWriter) error {
	if err := checkHostname(req.Hostname); err != nil {
		return err
	}
	if req.Key == "" && req.NodeToken == "" {
		return &apiError{status: 401, code: "unauthenticated", field: "node_token", message: "node_token is required (or, to complete a first join, the key with the reserved public_key)"}
	}
	if req.NodeToken == "" {
		if _, err := joinkeys.ParsePublicKey(req.PublicKey); err != nil {
			return err
		}
	}
	gpus, err := checkGPUs(req.GPUs)
	if err != nil {
		return err
	}
	unlock, err := s.nodeLocks.Lock(ctx, req.Hostname)
	if err != nil {
		return err
	}
	defer unlock()
	if req.NodeToken != "" {
		n, err := s.keyring.AuthenticateNode(ctx, req.Hostname, req.NodeToken)
		if err != nil {
			return err
		}
		if req.PublicKey != "" {
			pub, err := joinkeys.ParsePublicKey(req.PublicKey)
			if err != nil {
				return err
			}
			if pub != n.PublicKey {
				return &apiError{status: 409, code: "public_key_mismatch", field: "public_key",
					message: "this node joined with another WireGuard public key; a new key means a new machine: have an administrator disconnect the node, then join again"}
			}
		}
	} else if _, err := s.keyring.Check(ctx, req.Key); err != nil && !errors.Is(err, joinkeys.ErrKeyExhausted) {
		return err
	}
	if err := versionGate(s.cfg.ServerVersion, req.Version); err != nil {
		return err
	}
	before, err := s.keyring.Node(ctx, req.Hostname)
	if err != nil {
		return err
	}
	// The pod CIDR comes from Kubernetes, never from the node; one that
	// overlaps anything is refused before the node counts as registered.
	if before.Status != joinkeys.StatusDisconnected {
		if before, err = s.syncPodCIDR(ctx, before); err != nil {
			return err
		}
	}
	node, err := s.keyring.Register(ctx, joinkeys.Registration{NodeToken: req.NodeToken, Key: req.Key, Hostname: req.Hostname,
		PublicKey: req.PublicKey, Version: req.Version, GPUs: gpus, Source: source})
	if err != nil {
		return err
	}
	if err := s.mesh.UpsertPeer(ctx, s.peerOf(node)); err != nil {
		return err
	}
	if err := s.routePodCIDR(ctx, node.PodCIDR); err != nil {
		return err
	}
	group, err := s.groups.nodeRegistered(ctx, before, node)
	if err != nil {
		return err
	}
	if err := s.syncScrapeTarget(ctx, node); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, registerResponse{Node: viewNode(node), WorkerGroup: group})
	return nil
}

func checkGPUs(reports []gpuReport) ([]joinkeys.GPU, error) {
	gpus := make([]joinkeys.GPU, len(reports))
	for i, g := range reports {
		switch g.Vendor {
		case joinkeys.VendorNVIDIA, joinkeys.VendorAMD:
		case "":
			return nil, badField(fmt.Sprintf("gpus[%d].vendor", i), "vendor is required: %q or %q", joinkeys.VendorNVIDIA, joinkeys.VendorAMD)
		default:
			return nil, badField(fmt.Sprintf("gpus[%d].vendor", i), "vendor must be %q or %q, got %q", joinkeys.VendorNVIDIA, joinkeys.VendorAMD, g.Vendor)
		}
		if i > 0 && g.Vendor != reports[0].Vendor {
			return nil, badField(fmt.Sprintf("gpus[%d].vendor", i), "all GPUs of a node must be of one vendor (%s and %s reported)", reports[0].Vendor, g.Vendor)
		}
		gpus[i] = joinkeys.GPU{Index: g.Index, Vendor: g.Vendor, Name: g.Name, MemoryMiB: g.MemoryMiB, UUID: g.UUID}
	}
	return gpus, nil
}

// syncPodCIDR records the pod CIDR Kubernetes gave the node
// (Node.spec.podCIDR), if it has one and it changed.
func (s *Server) syncPodCIDR(ctx context.Context, n joinkeys.Node) (joinkeys.Node, error) {
	kn, err := s.kube.CoreV1().Nodes().Get(ctx, n.Hostname, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return n, nil // k3s has not registered it yet
	}
	if err != nil {
		return n, err
	}
	if kn.Spec.PodCIDR == "" {
		return n, nil
	}
	p, err := netip.ParsePrefix(kn.Spec.PodCIDR)
	if err != nil {
		return n, fmt.Errorf("node %s: Kubernetes gave it pod CIDR %q, which is not a CIDR", n.Hostname, kn.Spec.PodCIDR)
	}
	if p == n.PodCIDR {
		return n, nil
	}
	return s.keyring.SetNodePodCIDR(ctx, n.Hostname, p)
}

// ---- disconnect and leave

type hostnameRequest struct {
	Hostname string `json:"hostname"`
}

type disconnectResponse struct {
	Hostname string `json:"hostname"`
	Released bool   `json:"released"`
}

func (s *Server) handleDisconnect(w http.ResponseWriter, r *http.Request) {
	var req hostnameRequest
	err := decodeJSON(r, &req)
	if err == nil {
		err = checkHostname(req.Hostname)
	}
	var released bool
	if err == nil {
		p, _ := PrincipalFrom(r.Context())
		released, err = s.disconnect(r.Context(), req.Hostname, "admin:"+p.Subject)
	}
	s.metrics.join("disconnect", err)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, disconnectResponse{Hostname: req.Hostname, Released: released})
}

func (s *Server) handleLeave(w http.ResponseWriter, r *http.Request) {
	var req hostnameRequest
	err := decodeJSON(r, &req)
	if err == nil {
		err = checkHostname(req.Hostname)
	}
	var released bool
	if err == nil {
		if _, nerr := s.keyring.Node(r.Context(), req.Hostname); errors.Is(nerr, joinkeys.ErrNodeNotFound) {
			// Nothing left: a retry after a lost answer, as disconnect's.
			s.metrics.join("leave", nil)
			writeJSON(w, http.StatusOK, disconnectResponse{Hostname: req.Hostname, Released: false})
			return
		}
		err = s.authenticateNode(r, req.Hostname)
	}
	if err == nil {
		released, err = s.disconnect(r.Context(), req.Hostname, "node:"+req.Hostname)
	}
	s.metrics.join("leave", err)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, disconnectResponse{Hostname: req.Hostname, Released: released})
}

// disconnect tears a node down: the ledger marks it disconnected first,
// then its worker group pod, its Kubernetes Node and its peer go, and the
// ledger row goes last. Every step is idempotent, so a call that failed
// half-way is finished by the next one; released is false when there was
// nothing left to do.
func (s *Server) disconnect(ctx context.Context, hostname, actor string) (released bool, err error) {
	unlock, err := s.nodeLocks.Lock(ctx, hostname)
	if err != nil {
		return false, err
	}
	defer unlock()
	node, err := s.keyring.Node(ctx, hostname)
	if errors.Is(err, joinkeys.ErrNodeNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if node.Status != joinkeys.StatusDisconnected {
		if node, err = s.keyring.MarkDisconnected(ctx, hostname, actor); err != nil {
			return false, err
		}
	}
	if err := s.groups.nodeLeft(ctx, node); err != nil {
		return false, fmt.Errorf("remove the worker group of %s: %w", hostname, err)
	}
	if s.targets != nil {
		if err := s.targets.Remove(hostname); err != nil {
			return false, fmt.Errorf("remove the DCGM scrape target of %s: %w", hostname, err)
		}
	}
	err = s.kube.CoreV1().Nodes().Delete(ctx, hostname, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("delete the Kubernetes node %s: %w", hostname, err)
	}
	if err := s.unroutePodCIDR(ctx, node.PodCIDR); err != nil {
		return false, fmt.Errorf("remove the pod CIDR route of %s: %w", hostname, err)
	}
	if err := s.mesh.RemovePeer(ctx, node.PublicKey); err != nil && !errors.Is(err, mesh.ErrPeerNotFound) {
		return false, fmt.Errorf("remove the WireGuard peer of %s: %w", hostname, err)
	}
	// Only the record this teardown marked: had anything changed it since,
	// its peer might be back, and a row must never go while its peer stays.
	if _, err := s.keyring.ReleaseIfUnchanged(ctx, node, actor, "disconnected"); err != nil && !errors.Is(err, joinkeys.ErrNodeNotFound) {
		return false, err
	}
	return true, nil
}

// ---- verify-provider and report-version

type verifyProviderResponse struct {
	Org       string    `json:"org"`
	Provider  string    `json:"provider"`
	KeyID     string    `json:"key_id"`
	ExpiresAt time.Time `json:"expires_at"`
}

type emptyRequest struct{}

func (s *Server) handleVerifyProvider(w http.ResponseWriter, r *http.Request) {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		s.writeError(w, r, bodyTooLarge(s.cfg.MaxBodyBytes))
		return
	}
	if len(bytes.TrimSpace(data)) > 0 { // the body is {} or nothing
		var req emptyRequest
		if err := decodeStrict(data, &req); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	p, _ := PrincipalFrom(r.Context())
	writeJSON(w, http.StatusOK, verifyProviderResponse{Org: p.Provider.Org, Provider: p.Provider.Name, KeyID: p.Provider.KeyID, ExpiresAt: p.Provider.ExpiresAt})
}

type reportVersionRequest struct {
	Hostname string `json:"hostname"`
	Version  string `json:"version"`
}

// VersionAnnotation is the Kubernetes Node annotation that carries the
// worker's reported version.
const VersionAnnotation = "gridweave.dev/worker-version"

func (s *Server) handleReportVersion(w http.ResponseWriter, r *http.Request) {
	var req reportVersionRequest
	if err := decodeJSON(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := checkHostname(req.Hostname); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.Version == "" {
		s.writeError(w, r, badField("version", "version is required"))
		return
	}
	if err := checkVersion(req.Version); err != nil {
		s.writeError(w, r, badField("version", "invalid version: %v", err))
		return
	}
	if err := s.authenticateNode(r, req.Hostname); err != nil {
		s.writeError(w, r, err)
		return
	}
	node, err := s.keyring.ReportVersion(r.Context(), req.Hostname, bearer(r), req.Version)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, VersionAnnotation, req.Version)
	_, err = s.kube.CoreV1().Nodes().Patch(r.Context(), req.Hostname, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "gridweave"})
	if err != nil && !apierrors.IsNotFound(err) {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"node": viewNode(node)})
}

// ---- admin reads

func (s *Server) handleListNodes(w http.ResponseWriter, r *http.Request) {
	nodes, err := s.keyring.Nodes(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	views := make([]nodeView, len(nodes))
	for i, n := range nodes {
		views[i] = viewNode(n)
	}
	writeJSON(w, http.StatusOK, map[string]any{"nodes": views})
}

func (s *Server) handleGetNode(w http.ResponseWriter, r *http.Request) {
	h := r.PathValue("hostname")
	if err := joinkeys.ValidateHostname(h); err != nil {
		s.writeError(w, r, err)
		return
	}
	n, err := s.keyring.Node(r.Context(), h)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"node": viewNode(n)})
}

// syncScrapeTarget keeps a registered node's DCGM scrape target: written
// for a GPU node, removed for a CPU-only one.
func (s *Server) syncScrapeTarget(ctx context.Context, n joinkeys.Node) error {
	if s.targets == nil {
		return nil
	}
	if len(n.GPUs) == 0 {
		return s.targets.Remove(n.Hostname)
	}
	return s.targets.Write(ctx, scrapetargets.Target{Hostname: n.Hostname, VPNIP: n.VPNIP, GPUModel: n.GPUs[0].Name, GPUCount: len(n.GPUs)})
}

// authenticateNode checks that the bearer credential is hostname's node
// token: none or an invalid one is 401, a valid credential of another role
// (the admin token, a JWT, a provider key) 403.
func (s *Server) authenticateNode(r *http.Request, hostname string) error {
	token := bearer(r)
	if token == "" {
		return errUnauthenticated
	}
	_, err := s.keyring.AuthenticateNode(r.Context(), hostname, token)
	if errors.Is(err, joinkeys.ErrNodeTokenInvalid) {
		if _, other := s.auth.authenticate(r.Context(), token); other == nil {
			return errForbidden
		}
	}
	return err
}
