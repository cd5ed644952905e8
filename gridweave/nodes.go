package gridweave

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"gridweave.dev/gridweave/api"
	"gridweave.dev/gridweave/fleet"
	"gridweave.dev/joinkeys"
	"gridweave.dev/mesh"
	"gridweave.dev/mesh/wgkey"
)

// The join flow's routes: each decodes its body, calls the fleet (or the
// ledger, for keys) and encodes the answer. Errors map in errors.go.

func viewNode(n joinkeys.Node) api.Node {
	v := api.Node{
		Hostname: n.Hostname, PublicKey: n.PublicKey.String(), VPNIP: n.VPNIP.String(), Org: n.Org,
		JoinKeyID: n.JoinKeyID, Version: n.Version, Status: string(n.Status), GPUs: make([]api.GPU, len(n.GPUs)),
		CreatedAt: n.CreatedAt, UpdatedAt: n.UpdatedAt, RegisteredAt: timeOrNil(n.RegisteredAt), LastSeen: timeOrNil(n.LastSeen),
	}
	for i, g := range n.GPUs {
		v.GPUs[i] = api.GPU{Index: g.Index, Vendor: g.Vendor, Name: g.Name, MemoryMiB: g.MemoryMiB, UUID: g.UUID}
		if g.Vendor == "" { // recorded before AMD support
			v.GPUs[i].Vendor = joinkeys.VendorNVIDIA
		}
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

func viewKey(k joinkeys.Key) api.Key {
	v := api.Key{ID: k.ID, Kind: string(k.Kind), Org: k.Org, Labels: k.Labels, CreatedBy: k.CreatedBy, CreatedAt: k.CreatedAt,
		ExpiresAt: k.ExpiresAt, MaxUses: k.MaxUses, Uses: k.Uses, Revoked: k.Revoked(), RevokedAt: timeOrNil(k.RevokedAt), LastUsed: timeOrNil(k.LastUsed)}
	if k.Kind == joinkeys.KindProvider {
		v.Provider = &k.Provider
	}
	if v.Labels == nil {
		v.Labels = map[string]string{}
	}
	return v
}

// joinCommand is what a person pastes on the node. join-node.sh goes into
// a new private directory (mktemp -d, 0700), never the current one, where
// another user of the machine could have put a file of that name first.
func (s *Server) joinCommand(key string) string {
	master := s.cfg.MasterIP
	if master == "" {
		master = "<MASTER_IP>"
	}
	if s.cfg.PublicPin != "" {
		// -k is safe: the pin replaces CA verification (tlspin).
		base := fmt.Sprintf("https://%s:%d", hostForURL(master), s.cfg.Port)
		return fmt.Sprintf(`d=$(mktemp -d) && curl -fsSL --pinnedpubkey %s -k %s/join-node.sh -o "$d/join-node.sh" && sudo MASTER_IP=%s MASTER_PIN=%s bash "$d/join-node.sh" %s`,
			s.cfg.PublicPin, base, master, s.cfg.PublicPin, key)
	}
	base := fmt.Sprintf("http://%s:%d", hostForURL(master), s.cfg.Port)
	return fmt.Sprintf(`d=$(mktemp -d) && curl -fsSL %s/join-node.sh -o "$d/join-node.sh" && sudo MASTER_IP=%s bash "$d/join-node.sh" %s`, base, master, key)
}

func hostForURL(host string) string {
	if a, err := netip.ParseAddr(host); err == nil && a.Is6() {
		return "[" + host + "]"
	}
	return host
}

func (s *Server) handleMintKey(w http.ResponseWriter, r *http.Request) {
	var req api.MintKeyRequest
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
	resp := api.MintKeyResponse{ID: m.ID, Key: m.Secret, Kind: string(m.Kind), Org: m.Org, ExpiresAt: m.ExpiresAt, JoinCommand: s.joinCommand(m.Secret)}
	if m.Kind == joinkeys.KindProvider {
		resp.Provider = &m.Provider
	}
	writeJSON(w, http.StatusCreated, resp)
}

// handleListKeys pages the keys, oldest first; the continue token names
// the last key of the page (keys are revoked, never deleted, so it stays).
func (s *Server) handleListKeys(w http.ResponseWriter, r *http.Request) {
	limit, after, err := pageQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	keys, err := s.keyring.Keys(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	start := 0
	if after != "" {
		i := slices.IndexFunc(keys, func(k joinkeys.Key) bool { return k.ID == after })
		if i < 0 {
			s.writeError(w, r, badField("continue", "continue must be the token a previous page answered"))
			return
		}
		start = i + 1
	}
	page := keys[start:min(start+limit, len(keys))]
	views := make([]api.Key, len(page))
	for i, k := range page {
		views[i] = viewKey(k)
	}
	next := ""
	if start+limit < len(keys) {
		next = page[len(page)-1].ID
	}
	writeJSON(w, http.StatusOK, api.KeyList{Keys: views, Continue: continueToken(next)})
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

// ---- validate and register

// masterEndpoint is where nodes reach the master's WireGuard device now:
// the hub's (Backends.Hub), else MASTER_IP:WG_PORT.
func (s *Server) masterEndpoint() string {
	if s.hub != nil {
		if ep := s.hub(); ep != "" {
			return ep
		}
	}
	if s.cfg.MasterIP == "" {
		return ""
	}
	return fmt.Sprintf("%s:%d", hostForURL(s.cfg.MasterIP), s.cfg.WireGuardPort)
}

// joinStep is a join-flow handler: it decodes the body into a Req, runs
// the step, counts the outcome in the metrics and answers the step's
// result, or an error in the contract's shape.
func joinStep[Req, Resp any](s *Server, step string, run func(r *http.Request, req Req) (Resp, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req Req
		var resp Resp
		data, err := readBody(r)
		if err == nil {
			if err = decodeStrict(data, &req); err != nil && bodyCredentialed(step) {
				err = s.credentialBefore(r.Context(), data, err)
			}
		}
		if err == nil {
			resp, err = run(r, req)
		}
		s.metrics.join(step, err)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, resp)
	}
}

// bodyCredentialed reports whether a join step carries its credential in
// the body.
func bodyCredentialed(step string) bool { return step == "validate" || step == "register" }

// credentialBefore judges the credential of a body that did not decode
// (a field of the wrong type, an unknown field): a credential is checked
// before the body's other fields, so a forged one is a 401 whatever else
// is wrong; with a valid one the decoding error stands. A body that is
// not a JSON object at all keeps its 400.
func (s *Server) credentialBefore(ctx context.Context, data []byte, decodeErr error) error {
	var creds struct {
		Key       string `json:"key"`
		NodeToken string `json:"node_token"`
		Hostname  string `json:"hostname"`
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(data, &obj) != nil {
		return decodeErr
	}
	for field, dst := range map[string]*string{"key": &creds.Key, "node_token": &creds.NodeToken, "hostname": &creds.Hostname} {
		_ = json.Unmarshal(obj[field], dst) // a mistyped credential is no credential
	}
	if err := s.fleet.Authenticate(ctx, creds.Key, creds.NodeToken, creds.Hostname); err != nil {
		return err
	}
	return decodeErr
}

func (s *Server) handleValidate(w http.ResponseWriter, r *http.Request) {
	joinStep(s, "validate", func(r *http.Request, req api.ValidateRequest) (api.ValidateResponse, error) {
		var kubelet *api.KubeletJoin
		if s.kubeletTokens != nil {
			// The bootstrap token is made before the reservation: a
			// failure here leaves the machine free to try again with its
			// key. The credential is judged first: nobody else makes one.
			var err error
			if kubelet, err = s.kubeletJoin(r.Context(), req); err != nil {
				return api.ValidateResponse{}, err
			}
		}
		v, err := s.fleet.Validate(r.Context(), fleet.ValidateRequest{Key: req.Key, NodeToken: req.NodeToken, Hostname: req.Hostname,
			PublicKey: req.PublicKey, Version: req.Version, Source: clientIP(r)})
		if err != nil {
			return api.ValidateResponse{}, err
		}
		return api.ValidateResponse{
			VPNIP: v.Node.VPNIP.String(), MasterVPNIP: s.cfg.MasterVPNIP.String(), VPNCIDR: s.cfg.VPNCIDR.String(),
			MasterPublicKey: s.masterKey.String(), MasterEndpoint: s.masterEndpoint(), K3sURL: s.cfg.K3sURL,
			K3sToken: s.k3sToken, NodeToken: v.NodeToken, MasterVPNURL: s.cfg.VPNURL,
			NodeLabels: s.fleet.Marks().NodeLabels(v.Node), ClusterCIDR: s.fleet.PodRange().Cluster.String(), NodeCIDRMask: s.fleet.PodRange().NodeBits,
			Kubelet: kubelet,
		}, nil
	})(w, r)
}

// kubeletJoin is validate's kubelet field in the kubelet join mode: a
// bootstrap token made for the machine req names, bound to its public key,
// once its credential is judged. A request validate would refuse for its
// hostname or key gets no token (nil) and validate's own answer.
func (s *Server) kubeletJoin(ctx context.Context, req api.ValidateRequest) (*api.KubeletJoin, error) {
	if err := s.fleet.Authenticate(ctx, req.Key, req.NodeToken, req.Hostname); err != nil {
		return nil, err
	}
	pub, err := wgkey.Parse(req.PublicKey)
	if err != nil || fleet.CheckHostname(req.Hostname) != nil {
		return nil, nil
	}
	token, err := s.kubeletTokens.Issue(ctx, req.Hostname, s.fleet.Marks().TokenBinding(pub))
	if err != nil {
		return nil, err
	}
	dns := make([]string, len(s.cfg.KubeletClusterDNS))
	for i, a := range s.cfg.KubeletClusterDNS {
		dns[i] = a.String()
	}
	return &api.KubeletJoin{APIServer: s.cfg.KubeletAPIServer, CACertPEM: string(s.cfg.KubeletCAPEM),
		BootstrapToken: token, TLSServerName: s.cfg.KubeletTLSServerName, ClusterDNS: dns, ClusterDomain: s.cfg.ClusterDomain}, nil
}

func (s *Server) handleRegister(w http.ResponseWriter, r *http.Request) {
	joinStep(s, "register", func(r *http.Request, req api.RegisterRequest) (api.RegisterResponse, error) {
		gpus := make([]joinkeys.GPU, len(req.GPUs))
		for i, g := range req.GPUs {
			gpus[i] = joinkeys.GPU{Index: g.Index, Vendor: g.Vendor, Name: g.Name, MemoryMiB: g.MemoryMiB, UUID: g.UUID}
		}
		reg, err := s.fleet.Register(r.Context(), fleet.RegisterRequest{Key: req.Key, NodeToken: req.NodeToken, Hostname: req.Hostname,
			PublicKey: req.PublicKey, Version: req.Version, GPUs: gpus, Source: clientIP(r)})
		if err != nil {
			return api.RegisterResponse{}, err
		}
		resp := api.RegisterResponse{Node: s.viewNodes(r.Context(), reg.Node)[0]}
		if reg.WorkerGroup != "" {
			resp.WorkerGroup = &reg.WorkerGroup
		}
		return resp, nil
	})(w, r)
}

// ---- disconnect and leave

func (s *Server) handleDisconnect(w http.ResponseWriter, r *http.Request) {
	joinStep(s, "disconnect", func(r *http.Request, req api.HostnameRequest) (api.DisconnectResponse, error) {
		p, _ := PrincipalFrom(r.Context())
		released, err := s.fleet.Disconnect(r.Context(), req.Hostname, "admin:"+p.Subject)
		return api.DisconnectResponse{Hostname: req.Hostname, Released: released}, err
	})(w, r)
}

func (s *Server) handleLeave(w http.ResponseWriter, r *http.Request) {
	joinStep(s, "leave", func(r *http.Request, req api.HostnameRequest) (api.DisconnectResponse, error) {
		released, err := s.fleet.Leave(r.Context(), req.Hostname, bearer(r))
		if err != nil {
			return api.DisconnectResponse{}, s.nodeCredentialError(r, err)
		}
		return api.DisconnectResponse{Hostname: req.Hostname, Released: released}, nil
	})(w, r)
}

// ---- verify-provider and report-version

func (s *Server) handleVerifyProvider(w http.ResponseWriter, r *http.Request) {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		s.writeError(w, r, bodyTooLarge(s.cfg.MaxBodyBytes))
		return
	}
	if len(bytes.TrimSpace(data)) > 0 { // the body is {} or nothing
		var req api.EmptyRequest
		if err := decodeStrict(data, &req); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	p, _ := PrincipalFrom(r.Context())
	writeJSON(w, http.StatusOK, api.VerifyProviderResponse{Org: p.Provider.Org, Provider: p.Provider.Name, KeyID: p.Provider.KeyID, ExpiresAt: p.Provider.ExpiresAt})
}

func (s *Server) handleReportVersion(w http.ResponseWriter, r *http.Request) {
	var req api.ReportVersionRequest
	if err := decodeJSON(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	node, err := s.fleet.ReportVersion(r.Context(), req.Hostname, bearer(r), req.Version)
	if err != nil {
		s.writeError(w, r, s.nodeCredentialError(r, err))
		return
	}
	writeJSON(w, http.StatusOK, api.NodeEnvelope{Node: s.viewNodes(r.Context(), node)[0]})
}

// nodeCredentialError turns a refused node token into 403 when the bearer
// credential is a valid one of another role (the admin token, a JWT, a
// provider key): the caller is known, but not as this node.
func (s *Server) nodeCredentialError(r *http.Request, err error) error {
	if errors.Is(err, joinkeys.ErrNodeTokenInvalid) {
		if _, other := s.auth.authenticate(r.Context(), bearer(r)); other == nil {
			return errForbidden
		}
	}
	return err
}

// ---- admin reads

func (s *Server) handleListNodes(w http.ResponseWriter, r *http.Request) {
	limit, after, err := pageQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	nodes, next, err := s.keyring.NodesPage(r.Context(), after, limit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	views := s.viewNodes(r.Context(), nodes...)
	writeJSON(w, http.StatusOK, api.NodeList{Nodes: views, Continue: continueToken(next)})
}

// MaxPage is the largest page a list answers (and its default size).
const MaxPage = 500

// pageQuery reads a list's limit (1 to MaxPage, default MaxPage) and
// continue token (what the last page answered; empty for the first).
func pageQuery(r *http.Request) (limit int, after string, err error) {
	q := r.URL.Query()
	limit = MaxPage
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxPage {
			return 0, "", badField("limit", "limit must be a whole number from 1 to %d, got %q", MaxPage, v)
		}
		limit = n
	}
	if v := q.Get("continue"); v != "" {
		raw, err := base64.RawURLEncoding.DecodeString(v)
		if err != nil || len(raw) == 0 || !utf8.Valid(raw) {
			return 0, "", badField("continue", "continue must be the token a previous page answered")
		}
		after = string(raw)
	}
	return limit, after, nil
}

// continueToken is the opaque token of the page after the item named
// after ("" for none).
func continueToken(after string) string {
	if after == "" {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString([]byte(after))
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
	writeJSON(w, http.StatusOK, api.NodeEnvelope{Node: s.viewNodes(r.Context(), n)[0]})
}

// onlineWithin is how recent a tunnel's last handshake must be for its
// node to count as online: WireGuard renews a live session's handshake
// every 2 minutes (when the other side began it, up to about 3), and drops
// its keys after 3: 5 minutes leaves a margin.
const onlineWithin = 5 * time.Minute

// viewNodes shows nodes as the API does: the ledger's record with what
// the master's device observed of each tunnel (one peer's status for one
// node, as a register answers; one read for all for a page), its agent's
// version against the server's, and its links.
func (s *Server) viewNodes(ctx context.Context, nodes ...joinkeys.Node) []api.Node {
	handshakes := map[string]time.Time{}
	if o, ok := s.mesh.(mesh.Observer); ok {
		if len(nodes) == 1 {
			if st, err := o.PeerStatus(ctx, nodes[0].PublicKey); err == nil {
				handshakes[st.PublicKey.String()] = st.LastHandshake
			}
		} else if statuses, err := o.PeerStatuses(ctx); err == nil {
			for _, st := range statuses {
				handshakes[st.PublicKey.String()] = st.LastHandshake
			}
		}
	}
	serverMajor, _ := fleet.MajorVersion(s.cfg.ServerVersion)
	now := s.now()
	views := make([]api.Node, len(nodes))
	for i, n := range nodes {
		v := viewNode(n)
		if hs := handshakes[v.PublicKey]; !hs.IsZero() {
			v.LastHandshake = &hs
			v.Online = now.Sub(hs) < onlineWithin
		}
		if m, err := fleet.MajorVersion(n.Version); err == nil && m < serverMajor {
			v.VersionBehind = true
		}
		if pool, ok := fleet.PoolOf(n.GPUs); ok {
			v.WorkerGroup = &pool.Name
		}
		v.Links = s.linkCounts(n.Hostname)
		views[i] = v
	}
	return views
}

// pathNode is the {hostname} of the route when the ledger holds that
// node; else it has answered the error (400 for a bad hostname, 404 for
// an unknown one) and says false.
func (s *Server) pathNode(w http.ResponseWriter, r *http.Request) (string, bool) {
	h := r.PathValue("hostname")
	if err := joinkeys.ValidateHostname(h); err != nil {
		s.writeError(w, r, err)
		return "", false
	}
	if _, err := s.keyring.Node(r.Context(), h); err != nil {
		s.writeError(w, r, err)
		return "", false
	}
	return h, true
}
