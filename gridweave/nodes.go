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

	"k8s.io/client-go/kubernetes"

	"gridweave.dev/gridweave/api"
	"gridweave.dev/gridweave/fleet"
	"gridweave.dev/gridweave/kubeletjoin"
	"gridweave.dev/gridweave/linkbook"
	"gridweave.dev/joinkeys"
	"gridweave.dev/mesh"
	"gridweave.dev/mesh/wgkey"
)

// The join flow's routes: each decodes its body, calls the fleet (or the
// ledger, for keys) and encodes the answer. Errors map in errors.go.

// nodeRoutes serve the join flow, the join keys, the peer directory and
// the links, and the admin's reads of the nodes.
type nodeRoutes struct {
	responder
	cfg     *Config
	fleet   *fleet.Service
	keyring *joinkeys.Keyring
	mesh    mesh.Mesh
	kube    kubernetes.Interface
	auth    *authenticator
	metrics *metrics
	now     func() time.Time
	// hub says where nodes reach the master's WireGuard device now
	// (Backends.Hub).
	hub       func() string
	masterKey wgkey.Key
	k3sToken  string
	// kubeletTokens are the kubelet join mode's; nil in the k3s mode.
	kubeletTokens *kubeletjoin.Tokens

	// peers is the peer directory the agents wait on; links their
	// reports of their links.
	peers peerDirectory
	links linkbook.Book
	polls pollCount
	park  *pollPark
	// history is the fleet's recent samples, for the console.
	history fleetHistory
}

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
func (nr *nodeRoutes) joinCommand(key string) string {
	master := nr.cfg.MasterIP
	if master == "" {
		master = "<MASTER_IP>"
	}
	if nr.cfg.PublicPin != "" {
		// -k is safe: the pin replaces CA verification (tlspin).
		base := fmt.Sprintf("https://%s:%d", hostForURL(master), nr.cfg.Port)
		return fmt.Sprintf(`d=$(mktemp -d) && curl -fsSL --pinnedpubkey %s -k %s/join-node.sh -o "$d/join-node.sh" && sudo MASTER_IP=%s MASTER_PIN=%s bash "$d/join-node.sh" %s`,
			nr.cfg.PublicPin, base, master, nr.cfg.PublicPin, key)
	}
	base := fmt.Sprintf("http://%s:%d", hostForURL(master), nr.cfg.Port)
	return fmt.Sprintf(`d=$(mktemp -d) && curl -fsSL %s/join-node.sh -o "$d/join-node.sh" && sudo MASTER_IP=%s bash "$d/join-node.sh" %s`, base, master, key)
}

func hostForURL(host string) string {
	if a, err := netip.ParseAddr(host); err == nil && a.Is6() {
		return "[" + host + "]"
	}
	return host
}

func (nr *nodeRoutes) mintKey(r *http.Request, req api.MintKeyRequest) (api.MintKeyResponse, error) {
	switch {
	case req.TTLSeconds == nil:
		return api.MintKeyResponse{}, badField("ttl_seconds", "ttl_seconds is required: the key's lifetime in seconds")
	case *req.TTLSeconds <= 0:
		return api.MintKeyResponse{}, badField("ttl_seconds", "ttl_seconds must be positive, got %d", *req.TTLSeconds)
	case *req.TTLSeconds > int64(100*365*24*3600):
		return api.MintKeyResponse{}, badField("ttl_seconds", "ttl_seconds is too large")
	}
	kind := joinkeys.Kind(req.Kind)
	if kind == joinkeys.KindProvider && req.Provider == "" {
		req.Provider = req.Org
	}
	p, _ := PrincipalFrom(r.Context())
	m, err := nr.keyring.Mint(r.Context(), joinkeys.MintRequest{
		Kind: kind, Org: req.Org, Provider: req.Provider, TTL: time.Duration(*req.TTLSeconds) * time.Second,
		MaxUses: req.MaxUses, Labels: req.Labels, CreatedBy: p.Subject,
	})
	if err != nil {
		return api.MintKeyResponse{}, err
	}
	resp := api.MintKeyResponse{ID: m.ID, Key: m.Secret, Kind: string(m.Kind), Org: m.Org, ExpiresAt: m.ExpiresAt, JoinCommand: nr.joinCommand(m.Secret)}
	if m.Kind == joinkeys.KindProvider {
		resp.Provider = &m.Provider
	}
	return resp, nil
}

// listKeys pages the keys, oldest first; the continue token names
// the last key of the page (keys are revoked, never deleted, so it stays).
func (nr *nodeRoutes) listKeys(r *http.Request, _ noBody) (api.KeyList, error) {
	limit, after, err := pageQuery(r)
	if err != nil {
		return api.KeyList{}, err
	}
	keys, err := nr.keyring.Keys(r.Context())
	if err != nil {
		return api.KeyList{}, err
	}
	start := 0
	if after != "" {
		i := slices.IndexFunc(keys, func(k joinkeys.Key) bool { return k.ID == after })
		if i < 0 {
			return api.KeyList{}, badField("continue", "continue must be the token a previous page answered")
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
	return api.KeyList{Keys: views, Continue: continueToken(next)}, nil
}

func (nr *nodeRoutes) revokeKey(r *http.Request, _ noBody) (api.Key, error) {
	p, _ := PrincipalFrom(r.Context())
	k, err := nr.keyring.Revoke(r.Context(), r.PathValue("id"), p.Subject)
	return viewKey(k), err
}

// ---- validate and register

// masterEndpoint is where nodes reach the master's WireGuard device now:
// the hub's (Backends.Hub), else MasterIP:WireGuardPort.
func (nr *nodeRoutes) masterEndpoint() string {
	if nr.hub != nil {
		if ep := nr.hub(); ep != "" {
			return ep
		}
	}
	if nr.cfg.MasterIP == "" {
		return ""
	}
	return fmt.Sprintf("%s:%d", hostForURL(nr.cfg.MasterIP), nr.cfg.WireGuardPort)
}

// joinStep is a join-flow handler: it decodes the body into a Req, runs
// the step, counts the outcome in the metrics and answers the step's
// result, or an error in the contract's shape.
func joinStep[Req, Resp any](nr *nodeRoutes, step string, run func(r *http.Request, req Req) (Resp, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req Req
		var resp Resp
		data, err := readBody(r)
		if err == nil {
			if err = decodeStrict(data, &req); err != nil && bodyCredentialed(step) {
				err = nr.credentialBefore(r.Context(), data, err)
			}
		}
		if err == nil {
			resp, err = run(r, req)
		}
		nr.metrics.join(step, err)
		if err != nil {
			nr.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, resp)
	}
}

// joinRoute gives rt run as a join step (joinStep), its doc's body and
// answer types taken from run's.
func joinRoute[Req, Resp any](nr *nodeRoutes, step string, rt route, run func(r *http.Request, req Req) (Resp, error)) route {
	rt.doc.request, rt.doc.response, rt.doc.status = *new(Req), *new(Resp), http.StatusOK
	rt.handler = joinStep(nr, step, run)
	return rt
}

// bodyCredentialed reports whether a join step carries its credential in
// the body.
func bodyCredentialed(step string) bool { return step == "validate" || step == "register" }

// credentialBefore judges the credential of a body that did not decode
// (a field of the wrong type, an unknown field): a credential is checked
// before the body's other fields, so a forged one is a 401 whatever else
// is wrong; with a valid one the decoding error stands. A body that is
// not a JSON object at all keeps its 400.
func (nr *nodeRoutes) credentialBefore(ctx context.Context, data []byte, decodeErr error) error {
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
	if err := nr.fleet.Authenticate(ctx, creds.Key, creds.NodeToken, creds.Hostname); err != nil {
		return err
	}
	return decodeErr
}

func (nr *nodeRoutes) validate(r *http.Request, req api.ValidateRequest) (api.ValidateResponse, error) {
	vr := fleet.ValidateRequest{Key: req.Key, NodeToken: req.NodeToken, Hostname: req.Hostname,
		PublicKey: req.PublicKey, Version: req.Version, Source: clientIP(r)}
	var kubelet *api.KubeletJoin
	if nr.kubeletTokens != nil {
		// The bootstrap token is made last, once the join is reserved:
		// a request validate refuses gets none, and a token that cannot
		// be made undoes the reservation, so the machine may try again
		// with its key.
		vr.Admit = func(ctx context.Context, node joinkeys.Node) (err error) {
			kubelet, err = nr.kubeletJoin(ctx, node)
			return err
		}
	}
	v, err := nr.fleet.Validate(r.Context(), vr)
	if err != nil {
		return api.ValidateResponse{}, err
	}
	return api.ValidateResponse{
		VPNIP: v.Node.VPNIP.String(), MasterVPNIP: nr.cfg.MasterVPNIP.String(), VPNCIDR: nr.cfg.VPNCIDR.String(),
		MasterPublicKey: nr.masterKey.String(), MasterEndpoint: nr.masterEndpoint(), K3sURL: nr.cfg.K3sURL,
		K3sToken: nr.k3sToken, NodeToken: v.NodeToken, MasterVPNURL: nr.cfg.VPNURL,
		NodeLabels: nr.fleet.Marks().NodeLabels(v.Node), ClusterCIDR: nr.fleet.PodRange().Cluster.String(), NodeCIDRMask: nr.fleet.PodRange().NodeBits,
		Kubelet: kubelet,
	}, nil
}

// kubeletJoin is validate's kubelet field in the kubelet join mode for
// node, which validate admitted: a bootstrap token made for its hostname
// and bound to its public key.
func (nr *nodeRoutes) kubeletJoin(ctx context.Context, node joinkeys.Node) (*api.KubeletJoin, error) {
	token, err := nr.kubeletTokens.Issue(ctx, node.Hostname, nr.fleet.Marks().TokenBinding(node.PublicKey))
	if err != nil {
		return nil, err
	}
	dns := make([]string, len(nr.cfg.KubeletClusterDNS))
	for i, a := range nr.cfg.KubeletClusterDNS {
		dns[i] = a.String()
	}
	return &api.KubeletJoin{APIServer: nr.cfg.KubeletAPIServerURL(), CACertPEM: string(nr.cfg.KubeletCAPEM),
		BootstrapToken: token, TLSServerName: nr.cfg.KubeletTLSServerName, ClusterDNS: dns, ClusterDomain: nr.cfg.ClusterDomain}, nil
}

func (nr *nodeRoutes) register(r *http.Request, req api.RegisterRequest) (api.RegisterResponse, error) {
	gpus := make([]joinkeys.GPU, len(req.GPUs))
	for i, g := range req.GPUs {
		gpus[i] = joinkeys.GPU{Index: g.Index, Vendor: g.Vendor, Name: g.Name, MemoryMiB: g.MemoryMiB, UUID: g.UUID}
	}
	reg, err := nr.fleet.Register(r.Context(), fleet.RegisterRequest{Key: req.Key, NodeToken: req.NodeToken, Hostname: req.Hostname,
		PublicKey: req.PublicKey, Version: req.Version, GPUs: gpus, Source: clientIP(r)})
	if err != nil {
		return api.RegisterResponse{}, err
	}
	resp := api.RegisterResponse{Node: nr.viewNodes(r.Context(), reg.Node)[0]}
	if reg.WorkerGroup != "" {
		resp.WorkerGroup = &reg.WorkerGroup
	}
	return resp, nil
}

// ---- disconnect and leave

func (nr *nodeRoutes) disconnect(r *http.Request, req api.HostnameRequest) (api.DisconnectResponse, error) {
	p, _ := PrincipalFrom(r.Context())
	released, err := nr.fleet.Disconnect(r.Context(), req.Hostname, "admin:"+p.Subject)
	return api.DisconnectResponse{Hostname: req.Hostname, Released: released}, err
}

func (nr *nodeRoutes) leave(r *http.Request, req api.HostnameRequest) (api.DisconnectResponse, error) {
	released, err := nr.fleet.Leave(r.Context(), req.Hostname, bearer(r))
	if err != nil {
		return api.DisconnectResponse{}, nr.nodeCredentialError(r, err)
	}
	return api.DisconnectResponse{Hostname: req.Hostname, Released: released}, nil
}

// ---- verify-provider and report-version

func (nr *nodeRoutes) handleVerifyProvider(w http.ResponseWriter, r *http.Request) {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		nr.writeError(w, r, bodyTooLarge(nr.cfg.MaxBodyBytes))
		return
	}
	if len(bytes.TrimSpace(data)) > 0 { // the body is {} or nothing
		var req api.EmptyRequest
		if err := decodeStrict(data, &req); err != nil {
			nr.writeError(w, r, err)
			return
		}
	}
	p, _ := PrincipalFrom(r.Context())
	writeJSON(w, http.StatusOK, api.VerifyProviderResponse{Org: p.Provider.Org, Provider: p.Provider.Name, KeyID: p.Provider.KeyID, ExpiresAt: p.Provider.ExpiresAt})
}

func (nr *nodeRoutes) reportVersion(r *http.Request, req api.ReportVersionRequest) (api.NodeEnvelope, error) {
	node, err := nr.fleet.ReportVersion(r.Context(), req.Hostname, bearer(r), req.Version)
	if err != nil {
		return api.NodeEnvelope{}, nr.nodeCredentialError(r, err)
	}
	return api.NodeEnvelope{Node: nr.viewNodes(r.Context(), node)[0]}, nil
}

// nodeCredentialError turns a refused node token into 403 when the bearer
// credential is a valid one of another role (the admin token, a JWT, a
// provider key): the caller is known, but not as this node.
func (nr *nodeRoutes) nodeCredentialError(r *http.Request, err error) error {
	if errors.Is(err, joinkeys.ErrNodeTokenInvalid) {
		if _, other := nr.auth.authenticate(r.Context(), bearer(r)); other == nil {
			return errForbidden
		}
	}
	return err
}

// ---- admin reads

func (nr *nodeRoutes) listNodes(r *http.Request, _ noBody) (api.NodeList, error) {
	limit, after, err := pageQuery(r)
	if err != nil {
		return api.NodeList{}, err
	}
	nodes, next, err := nr.keyring.NodesPage(r.Context(), after, limit)
	if err != nil {
		return api.NodeList{}, err
	}
	return api.NodeList{Nodes: nr.viewNodes(r.Context(), nodes...), Continue: continueToken(next)}, nil
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

func (nr *nodeRoutes) getNode(r *http.Request, _ noBody) (api.NodeEnvelope, error) {
	h := r.PathValue("hostname")
	if err := joinkeys.ValidateHostname(h); err != nil {
		return api.NodeEnvelope{}, err
	}
	n, err := nr.keyring.Node(r.Context(), h)
	if err != nil {
		return api.NodeEnvelope{}, err
	}
	return api.NodeEnvelope{Node: nr.viewNodes(r.Context(), n)[0]}, nil
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
func (nr *nodeRoutes) viewNodes(ctx context.Context, nodes ...joinkeys.Node) []api.Node {
	handshakes := map[string]time.Time{}
	if o, ok := nr.mesh.(mesh.Observer); ok {
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
	serverMajor, _ := fleet.MajorVersion(nr.cfg.ServerVersion)
	now := nr.now()
	counts := nr.linkCounts(ctx, nodes)
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
		if c, ok := counts[n.Hostname]; ok {
			v.Links = &c
		}
		views[i] = v
	}
	return views
}

// pathNode is the {hostname} of the route when the ledger holds that
// node; else the error (400 for a bad hostname, 404 for an unknown one).
func (nr *nodeRoutes) pathNode(r *http.Request) (string, error) {
	n, err := nr.pathLedgerNode(r)
	return n.Hostname, err
}

// pathLedgerNode is the ledger node the path's {hostname} names.
func (nr *nodeRoutes) pathLedgerNode(r *http.Request) (joinkeys.Node, error) {
	h := r.PathValue("hostname")
	if err := joinkeys.ValidateHostname(h); err != nil {
		return joinkeys.Node{}, err
	}
	return nr.keyring.Node(r.Context(), h)
}

// routes are the nodeRoutes routes.
func (nr *nodeRoutes) routes() []route {
	return []route{
		jsonRoute(nr.responder, route{pattern: "POST /v1/nodes/join-keys", auth: authAdmin, on: onPublic,
			doc: operation{id: "mintJoinKey", tag: "nodes", summary: "Mint a join key",
				description: "Returns the key once (it is stored hashed) with the command a person pastes on the node. A provider key is a JWT that also authenticates the provider (verify-provider).", codes: ledgerCodes}}, http.StatusCreated, nr.mintKey),
		jsonRoute(nr.responder, route{pattern: "GET /v1/nodes/join-keys", auth: authAdmin, on: onPublic,
			doc: operation{id: "listJoinKeys", tag: "nodes", summary: "List join keys (never their secrets), a page at a time, oldest first",
				query: pageParams, codes: ledgerCodes}}, http.StatusOK, nr.listKeys),
		jsonRoute(nr.responder, route{pattern: "DELETE /v1/nodes/join-keys/{id}", auth: authAdmin, on: onPublic,
			doc: operation{id: "revokeJoinKey", tag: "nodes", summary: "Revoke a join key",
				description: "Nodes that joined with it stay; it admits no new node.",
				codes:       ledgerCodes}}, http.StatusOK, nr.revokeKey),
		joinRoute(nr, "validate", route{pattern: "POST /v1/nodes/validate", auth: authBodyCredential, on: onPublic,
			doc: operation{id: "validateNode", tag: "nodes", summary: "Join step 1: check the key, reserve the VPN address, add the WireGuard peer",
				description: "The first join presents `key`; a re-join of the same public key presents `node_token` (the key alone is then 409 `node_token_required`). " +
					"A hostname held by another public key is 409 `hostname_taken`; a first join under the name of a Kubernetes Node no Gridweave join made is 409 `hostname_in_cluster`. A different major version is 426 `version_mismatch` (run the join command again on the node).",
				codes: fleetCodes}}, nr.validate),
		joinRoute(nr, "register", route{pattern: "POST /v1/nodes/register", auth: authBodyCredential, on: onPublic | onVPN,
			doc: operation{id: "registerNode", tag: "nodes", summary: "Join step 2: finalise the peer; a GPU node joins its worker group",
				description: "`key` completes a reservation made by validate (same public key); every later register presents `node_token`. " +
					"The pod CIDR comes from Kubernetes, never from the node. `worker_group` is null for a CPU-only node.",
				codes: fleetCodes}}, nr.register),
		joinRoute(nr, "disconnect", route{pattern: "POST /v1/nodes/disconnect", auth: authAdmin, on: onPublic,
			doc: operation{id: "disconnectNode", tag: "nodes", summary: "Remove a node: peer, routes, scrape target, worker, Kubernetes Node, ledger",
				description: "Idempotent: `released` is false when there was nothing left to remove. In the kubelet join mode the Node is drained first (cordoned, its pods evicted, waited for up to the server's drain timeout).",
				codes:       fleetCodes}}, nr.disconnect),
		joinRoute(nr, "leave", route{pattern: "POST /v1/nodes/leave", auth: authNodeToken, on: onPublic | onVPN,
			doc: operation{id: "leaveNode", tag: "nodes", summary: "A node leaves by itself (its node token as bearer)",
				codes: fleetCodes}}, nr.leave),
		{pattern: "POST /v1/nodes/verify-provider", auth: authProvider, on: onPublic, handler: nr.handleVerifyProvider,
			doc: operation{id: "verifyProvider", tag: "nodes", summary: "Check a provider key (the key as bearer)",
				description: "The body is `{}` or nothing.",
				status:      200, response: api.VerifyProviderResponse{}, codes: []string{api.CodeInvalidJSON, api.CodeInvalidBody, api.CodeInvalidField, api.CodeBodyTooLarge}}},
		jsonRoute(nr.responder, route{pattern: "POST /v1/nodes/report-version", auth: authNodeToken, on: onPublic | onVPN,
			doc: operation{id: "reportVersion", tag: "nodes", summary: "A node reports its worker version (its node token as bearer)",
				description: "Recorded in the ledger and as the annotation `" + fleet.VersionAnnotation + "` on the Kubernetes Node.",
				codes:       fleetCodes}}, http.StatusOK, nr.reportVersion),
		{pattern: "GET /v1/nodes/peers", auth: authNodeToken, on: onPublic | onVPN, handler: nr.handlePeers,
			doc: operation{id: "nodePeers", tag: "nodes", summary: "A node waits for the other nodes it links to directly (its node token as bearer)",
				description: "Every node with a tunnel that the caller may link to (its own org's, and those the server shares with every org): public key, VPN address, pod CIDR and the endpoints to try (where the master's WireGuard device sees its packets come from, then the ones its agent reported; those in private ranges only when the server is told the fleet shares a LAN). " +
					"A node holds at most " + strconv.Itoa(MaxPollsPerNode) + " long polls open at once (429 `too_many_polls`). " +
					"With `since` (the `revision` of the last answer) and `wait`, the answer comes when the directory differs from that revision, or after `wait` seconds with the same one (a long poll: call again). " +
					"A node missing from an answer has left: its peer goes. Served on the VPN listener as on the public one.",
				query: []param{
					{"hostname", "The calling node (required).", stringParam},
					{"since", "The revision the node holds; the answer waits while the directory is at it.", stringParam},
					{"wait", "How long to wait for a change, in seconds (0 to 60; default 0, answer at once).", intParam},
					{"delta", "With `since`: answer the changes since that revision (`delta` true, the peers added or changed, the hostnames `removed`) when the server still knows it, else the whole directory. A join then costs each waiting node a few hundred bytes, not the whole fleet.", boolParam},
				},
				status: 200, response: api.PeerDirectory{}, codes: slices.Concat(ledgerCodes, []string{api.CodeTooManyPolls})}},
		jsonRoute(nr.responder, route{pattern: "POST /v1/nodes/links", auth: authNodeToken, on: onPublic | onVPN,
			doc: operation{id: "reportLinks", tag: "nodes", summary: "A node reports the state of its links to the other nodes (its node token as bearer)",
				description: "Per other node: direct, relayed (through the master) or connecting, the endpoint, the last handshake and bytes. Kept in memory; an agent reports every few seconds.",
				codes:       ledgerCodes}}, http.StatusOK, nr.reportLinks),
		jsonRoute(nr.responder, route{pattern: "GET /v1/nodes", auth: authAdmin, on: onPublic,
			doc: operation{id: "listNodes", tag: "nodes", summary: "List nodes, a page at a time, by hostname",
				query: pageParams, codes: ledgerCodes}}, http.StatusOK, nr.listNodes),
		jsonRoute(nr.responder, route{pattern: "GET /v1/nodes/{hostname}", auth: authAdmin, on: onPublic,
			doc: operation{id: "getNode", tag: "nodes", summary: "Get a node",
				codes: ledgerCodes}}, http.StatusOK, nr.getNode),
		jsonRoute(nr.responder, route{pattern: "GET /v1/nodes/{hostname}/links", auth: authAdmin, on: onPublic,
			doc: operation{id: "getNodeLinks", tag: "nodes", summary: "A node's links to the other nodes, as its agent last reported them",
				codes: ledgerCodes}}, http.StatusOK, nr.nodeLinks),
		jsonRoute(nr.responder, route{pattern: "GET /v1/nodes/{hostname}/audit", auth: authAdmin, on: onPublic,
			doc: operation{id: "getNodeAudit", tag: "nodes", summary: "A node's audit trail: joins (with which key, from which address), registers, refusals, disconnects and leaves", codes: ledgerCodes}}, http.StatusOK, nr.nodeAudit),
		jsonRoute(nr.responder, route{pattern: "GET /v1/nodes/{hostname}/kubernetes", auth: authAdmin, on: onPublic,
			doc: operation{id: "getNodeKubernetes", tag: "nodes", summary: "A node's Kubernetes Node: whether it exists, its conditions",
				codes: slices.Concat(ledgerCodes, kubernetesCodes)}}, http.StatusOK, nr.nodeKubernetes),
		jsonRoute(nr.responder, route{pattern: "GET /v1/nodes/history", auth: authAdmin, on: onPublic,
			doc: operation{id: "fleetHistory", tag: "nodes", summary: "The fleet over the last six hours: registered and online nodes and online GPUs by pool, a sample a minute", codes: ledgerCodes}}, http.StatusOK, nr.fleetHistory),
	}
}
