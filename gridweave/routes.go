package gridweave

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"gridweave.dev/gridweave/api"
	"gridweave.dev/gridweave/fleet"
)

// route is one entry of the API, declared once: method and path pattern,
// who may call it, the listeners that serve it, what the OpenAPI document
// says of it, and the handler. routeTable is the whole surface; the mux of
// each listener, the OpenAPI document and the unmatched answers (404, 405
// with Allow) are derived from it.
type route struct {
	pattern string // "METHOD /path/{param}"
	auth    authRule
	on      listeners
	handler http.HandlerFunc
	doc     operation
}

// noBody is the body of a typed route that reads none.
type noBody struct{}

// jsonRoute gives rt a typed handler: f gets the request (its context,
// path and query) and its JSON body decoded strictly into Req (none is
// read when Req is noBody), and f's answer goes out as JSON with status,
// its error in the contract's shape. The doc's body and answer types and
// its status come from f, unless rt's doc names others.
func jsonRoute[Req, Resp any](a responder, rt route, status int, f func(r *http.Request, body Req) (Resp, error)) route {
	_, none := any(*new(Req)).(noBody)
	if !none && rt.doc.request == nil {
		rt.doc.request = *new(Req)
	}
	if rt.doc.response == nil {
		rt.doc.response = *new(Resp)
	}
	rt.doc.status = status
	rt.handler = func(w http.ResponseWriter, r *http.Request) {
		var body Req
		if !none {
			if err := decodeJSON(r, &body); err != nil {
				a.writeError(w, r, err)
				return
			}
		}
		resp, err := f(r, body)
		if err != nil {
			a.writeError(w, r, err)
			return
		}
		writeJSON(w, status, resp)
	}
	return rt
}

// listeners are the listeners that serve a route.
type listeners uint8

const (
	// onPublic: the public listener (Config.Port), behind the route's
	// credential.
	onPublic listeners = 1 << iota
	// onVPN: the VPN listener (Config.VPNURL), reached through a joined
	// machine's tunnel, with the same credential as on the public one.
	onVPN
	// onInternal: the internal listener (Config.InternalAddr), without a
	// credential (the listener is one: it never answers the fleet).
	onInternal
	// publicUntilVPN: a large download only a joined machine needs, on the
	// public listener until a VPN listener is configured; from then on
	// the public one answers that it is served through the tunnel.
	publicUntilVPN
)

// authRule is who may call a route. The middleware enforces the first
// five before the handler runs; the join flow's two are credentials the
// fleet checks first thing, before any other field of the request.
type authRule string

const (
	authNone     authRule = "none"
	authAdmin    authRule = "admin"
	authUser     authRule = "user" // a user JWT, or an admin credential
	authProvider authRule = "provider"
	authInternal authRule = "internal" // INTERNAL_TOKEN here; none on INTERNAL_ADDR
	// authBodyCredential: a join key or node token in the body (checked
	// by the fleet).
	authBodyCredential authRule = "join key or node token in the body"
	// authNodeToken: the node's token as the bearer (checked by the fleet;
	// a valid credential of another role is 403).
	authNodeToken authRule = "node token as bearer"
)

func (s *Server) routeTable() []route {
	return slices.Concat(s.serviceRoutes(), s.pages.routes(), s.downloads.routes(), s.clusters.routes(), s.crd.routes(), s.kubetorch.routes(), s.serve.routes())
}

// serviceRoutes are the routes of the server itself.
func (s *Server) serviceRoutes() []route {
	return []route{
		{pattern: "GET /healthz", auth: authNone, on: onPublic | onVPN | onInternal, handler: s.handleHealthz,
			doc: operation{id: "healthz", tag: "service", summary: "Liveness",
				description: "Answers while the process serves; not rate limited.",
				status:      200, response: api.Health{}}},
		{pattern: "GET /readyz", auth: authNone, on: onPublic, handler: s.handleReadyz,
			doc: operation{id: "readyz", tag: "service", summary: "Readiness: the ledger, WireGuard and Kubernetes answer",
				description: "503 when a backend does not answer: `status` is `unavailable` and `error` says which.",
				status:      200, response: api.Readiness{}, alternatives: map[int]any{503: api.Readiness{}}}},
		{pattern: "GET /metrics", auth: authAdmin, on: onPublic | onInternal, handler: s.metrics.handler().ServeHTTP,
			doc: operation{id: "metrics", tag: "service", summary: "Prometheus metrics",
				description: "The Prometheus text exposition. Needs the admin credential on the public listener; open on the internal one.",
				status:      200, responseType: "text/plain", response: ""}},

		// The node side's downloads.

		// The join flow (docs/api.md).
		{pattern: "POST /v1/nodes/join-keys", auth: authAdmin, on: onPublic, handler: s.handleMintKey,
			doc: operation{id: "mintJoinKey", tag: "nodes", summary: "Mint a join key",
				description: "Returns the key once (it is stored hashed) with the command a person pastes on the node. A provider key is a JWT that also authenticates the provider (verify-provider).",
				request:     api.MintKeyRequest{}, status: 201, response: api.MintKeyResponse{}}},
		{pattern: "GET /v1/nodes/join-keys", auth: authAdmin, on: onPublic, handler: s.handleListKeys,
			doc: operation{id: "listJoinKeys", tag: "nodes", summary: "List join keys (never their secrets), a page at a time, oldest first",
				query: pageParams, status: 200, response: api.KeyList{}}},
		{pattern: "DELETE /v1/nodes/join-keys/{id}", auth: authAdmin, on: onPublic, handler: s.handleRevokeKey,
			doc: operation{id: "revokeJoinKey", tag: "nodes", summary: "Revoke a join key",
				description: "Nodes that joined with it stay; it admits no new node.",
				status:      200, response: api.Key{}, errors: []int{404}}},
		{pattern: "POST /v1/nodes/validate", auth: authBodyCredential, on: onPublic, handler: s.handleValidate,
			doc: operation{id: "validateNode", tag: "nodes", summary: "Join step 1: check the key, reserve the VPN address, add the WireGuard peer",
				description: "The first join presents `key`; a re-join of the same public key presents `node_token` (the key alone is then 409 `node_token_required`). " +
					"A hostname held by another public key is 409 `hostname_taken`; a first join under the name of a Kubernetes Node no Gridweave join made is 409 `hostname_in_cluster`. A different major version is 426 `version_mismatch` (run the join command again on the node).",
				request: api.ValidateRequest{}, status: 200, response: api.ValidateResponse{}, errors: []int{409, 426}}},
		{pattern: "POST /v1/nodes/register", auth: authBodyCredential, on: onPublic | onVPN, handler: s.handleRegister,
			doc: operation{id: "registerNode", tag: "nodes", summary: "Join step 2: finalise the peer; a GPU node joins its worker group",
				description: "`key` completes a reservation made by validate (same public key); every later register presents `node_token`. " +
					"The pod CIDR comes from Kubernetes, never from the node. `worker_group` is null for a CPU-only node.",
				request: api.RegisterRequest{}, status: 200, response: api.RegisterResponse{}, errors: []int{409, 422, 426}}},
		{pattern: "POST /v1/nodes/disconnect", auth: authAdmin, on: onPublic, handler: s.handleDisconnect,
			doc: operation{id: "disconnectNode", tag: "nodes", summary: "Remove a node: peer, routes, scrape target, worker, Kubernetes Node, ledger",
				description: "Idempotent: `released` is false when there was nothing left to remove. In the kubelet join mode the Node is drained first (cordoned, its pods evicted, waited for up to KUBELET_DRAIN_TIMEOUT).",
				request:     api.HostnameRequest{}, status: 200, response: api.DisconnectResponse{}, errors: []int{409}}},
		{pattern: "POST /v1/nodes/leave", auth: authNodeToken, on: onPublic | onVPN, handler: s.handleLeave,
			doc: operation{id: "leaveNode", tag: "nodes", summary: "A node leaves by itself (its node token as bearer)",
				request: api.HostnameRequest{}, status: 200, response: api.DisconnectResponse{}, errors: []int{409}}},
		{pattern: "POST /v1/nodes/verify-provider", auth: authProvider, on: onPublic, handler: s.handleVerifyProvider,
			doc: operation{id: "verifyProvider", tag: "nodes", summary: "Check a provider key (the key as bearer)",
				description: "The body is `{}` or nothing.",
				status:      200, response: api.VerifyProviderResponse{}, errors: []int{400}}},
		{pattern: "POST /v1/nodes/report-version", auth: authNodeToken, on: onPublic | onVPN, handler: s.handleReportVersion,
			doc: operation{id: "reportVersion", tag: "nodes", summary: "A node reports its worker version (its node token as bearer)",
				description: "Recorded in the ledger and as the annotation `" + fleet.VersionAnnotation + "` on the Kubernetes Node.",
				request:     api.ReportVersionRequest{}, status: 200, response: api.NodeEnvelope{}, errors: []int{404, 409}}},
		{pattern: "GET /v1/nodes/peers", auth: authNodeToken, on: onPublic | onVPN, handler: s.handlePeers,
			doc: operation{id: "nodePeers", tag: "nodes", summary: "A node waits for the other nodes it links to directly (its node token as bearer)",
				description: "Every node with a tunnel that the caller may link to (its own org's, and those of `SHARED_ORGS`): public key, VPN address, pod CIDR and the endpoints to try (where the master's WireGuard device sees its packets come from, then the ones its agent reported; those in private ranges only with `FLEET_LAN=on`). " +
					"A node holds at most " + strconv.Itoa(MaxPollsPerNode) + " long polls open at once (429 `too_many_polls`). " +
					"With `since` (the `revision` of the last answer) and `wait`, the answer comes when the directory differs from that revision, or after `wait` seconds with the same one (a long poll: call again). " +
					"A node missing from an answer has left: its peer goes. Served on the VPN listener as on the public one.",
				query: []param{
					{"hostname", "The calling node (required).", stringParam},
					{"since", "The revision the node holds; the answer waits while the directory is at it.", stringParam},
					{"wait", "How long to wait for a change, in seconds (0 to 60; default 0, answer at once).", intParam},
				},
				status: 200, response: api.PeerDirectory{}, errors: []int{404}}},
		{pattern: "POST /v1/nodes/links", auth: authNodeToken, on: onPublic | onVPN, handler: s.handleReportLinks,
			doc: operation{id: "reportLinks", tag: "nodes", summary: "A node reports the state of its links to the other nodes (its node token as bearer)",
				description: "Per other node: direct, relayed (through the master) or connecting, the endpoint, the last handshake and bytes. Kept in memory; an agent reports every few seconds.",
				request:     api.LinksReport{}, status: 200, response: api.LinksAccepted{}, errors: []int{404}}},
		{pattern: "GET /v1/nodes", auth: authAdmin, on: onPublic, handler: s.handleListNodes,
			doc: operation{id: "listNodes", tag: "nodes", summary: "List nodes, a page at a time, by hostname",
				query: pageParams, status: 200, response: api.NodeList{}}},
		{pattern: "GET /v1/nodes/{hostname}", auth: authAdmin, on: onPublic, handler: s.handleGetNode,
			doc: operation{id: "getNode", tag: "nodes", summary: "Get a node",
				status: 200, response: api.NodeEnvelope{}, errors: []int{404}}},
		{pattern: "GET /v1/nodes/{hostname}/links", auth: authAdmin, on: onPublic, handler: s.handleNodeLinks,
			doc: operation{id: "getNodeLinks", tag: "nodes", summary: "A node's links to the other nodes, as its agent last reported them",
				status: 200, response: api.NodeLinks{}, errors: []int{404}}},
		{pattern: "GET /v1/nodes/{hostname}/audit", auth: authAdmin, on: onPublic, handler: s.handleNodeAudit,
			doc: operation{id: "getNodeAudit", tag: "nodes", summary: "A node's audit trail: joins (with which key, from which address), registers, refusals, disconnects and leaves",
				status: 200, response: api.AuditList{}}},
		{pattern: "GET /v1/nodes/{hostname}/kubernetes", auth: authAdmin, on: onPublic, handler: s.handleNodeKubernetes,
			doc: operation{id: "getNodeKubernetes", tag: "nodes", summary: "A node's Kubernetes Node: whether it exists, its conditions",
				status: 200, response: api.KubernetesNode{}, errors: []int{404}}},
		{pattern: "GET /v1/nodes/history", auth: authAdmin, on: onPublic, handler: s.handleFleetHistory,
			doc: operation{id: "fleetHistory", tag: "nodes", summary: "The fleet over the last six hours: registered and online nodes and online GPUs by pool, a sample a minute",
				status: 200, response: api.FleetHistory{}}},

		// The web console's page and files (its data comes from the API).

		// The gateway's hands (internal: INTERNAL_TOKEN on this listener,
		// none on INTERNAL_ADDR's).
	}
}

// routes builds the public handler, the internal one and the VPN one from
// routeTable (each route on the listeners its on names), each behind its
// middleware chain. A route on the internal listener is served there
// without a credential.
func (s *Server) routes() (public, internal, vpn http.Handler) {
	table := s.routeTable()
	pmux, vmux, imux := http.NewServeMux(), http.NewServeMux(), http.NewServeMux()
	var publicTable, vpnTable, internalTable []route
	for _, rt := range table {
		h := s.withCredential(rt.auth, rt.handler)
		switch {
		case rt.on&publicUntilVPN != 0 && s.cfg.VPNURL != "":
			pmux.Handle(rt.pattern, s.named(rt.pattern, http.HandlerFunc(s.downloadNotHere)))
			publicTable = append(publicTable, rt)
		case rt.on&(onPublic|publicUntilVPN) != 0:
			pmux.Handle(rt.pattern, s.named(rt.pattern, h))
			publicTable = append(publicTable, rt)
		default:
			pmux.Handle(rt.pattern, s.named(rt.pattern, http.HandlerFunc(s.notOnPublic)))
			publicTable = append(publicTable, rt)
		}
		if rt.on&onVPN != 0 {
			vmux.Handle(rt.pattern, s.named(rt.pattern, h))
			vpnTable = append(vpnTable, rt)
		}
		if rt.on&onInternal != 0 {
			imux.Handle(rt.pattern, s.named(rt.pattern, rt.handler))
			internalTable = append(internalTable, rt)
		}
	}
	pmux.Handle("/", s.named("unmatched", s.notFound(publicTable)))
	public = chain(pmux, withRequestID, s.withAccessLog, s.withCORS, s.withRateLimit, s.withBodyLimit)
	vmux.Handle("/", s.named("unmatched", s.notFound(vpnTable)))
	vpn = chain(vmux, withRequestID, s.withAccessLog, s.throughTunnelOnly, s.withRateLimit, s.withBodyLimit)
	imux.Handle("/", s.named("unmatched", s.notFound(internalTable)))
	internal = chain(imux, withRequestID, s.withAccessLog, s.notFromTheFleet, s.withBodyLimit)
	return public, internal, vpn
}

// withCredential puts the check of rule's credential in front of h (the
// join flow's body credentials are the fleet's to check).
func (s *Server) withCredential(rule authRule, h http.Handler) http.Handler {
	switch rule {
	case authAdmin:
		return s.requireRole(h, RoleAdmin)
	case authProvider:
		return s.requireRole(h, RoleProvider)
	case authInternal:
		return s.requireInternalToken(h)
	case authUser:
		return s.requireRole(h, RoleAdmin, RoleUser)
	}
	return h
}

// notFromTheFleet refuses, on the internal listener, a caller whose
// address is in VPN_CIDR or the cluster's pod range: a joined machine can
// route any address of the master into its tunnel (it widens its own
// master peer's allowed IPs) and Linux delivers the packet to whichever
// local address it names, so an INTERNAL_ADDR on a bridge would otherwise
// answer every machine and every pod without a credential.
func (s *Server) notFromTheFleet(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ip, err := netip.ParseAddr(clientIP(r))
		if err != nil || s.cfg.VPNCIDR.Contains(ip.Unmap()) || s.fleet.PodRange().Cluster.Contains(ip.Unmap()) {
			s.writeError(w, r, &apiError{code: api.CodeFromTheFleet,
				message: "the internal listener does not answer callers from the WireGuard tunnels (VPN_CIDR) or the cluster's pods (CLUSTER_CIDR); use the public listener with INTERNAL_TOKEN"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// throughTunnelOnly refuses a caller whose address is not inside the VPN:
// the kernel delivers packets for the VPN address arriving on any
// interface, but only a peer of the tunnel has an address inside it (a
// connection from elsewhere with a forged one cannot complete, its
// answers go into the tunnel).
func (s *Server) throughTunnelOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.fromTunnel(r) {
			s.writeError(w, r, &apiError{code: api.CodeOutsideVPN, message: "this listener answers only through the WireGuard tunnel (callers inside VPN_CIDR); use the public listener"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// fromTunnel reports whether r's caller is inside the VPN: a peer of the
// tunnel.
func (s *Server) fromTunnel(r *http.Request) bool {
	ip, err := netip.ParseAddr(clientIP(r))
	return err == nil && s.cfg.VPNCIDR.Contains(ip.Unmap())
}

// notOnPublic is the public listener's answer for a route it does not
// serve: the KubeTorch bundles, fetched through the tunnel or from the
// internal listener.
func (s *Server) notOnPublic(w http.ResponseWriter, r *http.Request) {
	s.writeError(w, r, &apiError{code: api.CodeNotFound,
		message: "this is served on the VPN listener (http://MASTER_VPN_IP:VPN_HTTP_PORT, reached through a node's tunnel) and the internal listener, not on the public one"})
}

// downloadNotHere is the public listener's answer for a download a
// machine fetches through its tunnel.
func (s *Server) downloadNotHere(w http.ResponseWriter, r *http.Request) {
	s.writeError(w, r, &apiError{code: api.CodeThroughTheTunnel,
		message: "this download is served only through a joined machine's tunnel, on the VPN listener (" + s.cfg.VPNURL + "); the join agent fetches it there"})
}

// named records the route pattern for the access log and the metrics.
func (s *Server) named(pattern string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if info, ok := r.Context().Value(routeInfoKey{}).(*routeInfo); ok {
			info.pattern = pattern
		}
		h.ServeHTTP(w, r)
	})
}

// notFound answers what no route of table matched: 405 with Allow when
// the path exists for other methods, else 404, both in the contract's shape.
func (s *Server) notFound(table []route) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { s.answerUnmatched(w, r, table) }
}

func (s *Server) answerUnmatched(w http.ResponseWriter, r *http.Request, table []route) {
	var allowed []string
	for _, rt := range table {
		method, path, _ := strings.Cut(rt.pattern, " ")
		if method != r.Method && matchPath(path, r.URL.Path) && !slices.Contains(allowed, method) {
			allowed = append(allowed, method)
		}
	}
	if len(allowed) > 0 {
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		s.writeError(w, r, &apiError{code: api.CodeMethodNotAllowed, message: r.Method + " is not allowed on " + r.URL.Path + "; use " + strings.Join(allowed, ", ")})
		return
	}
	s.writeError(w, r, &apiError{code: api.CodeNoSuchRoute, message: "no route " + r.Method + " " + r.URL.Path})
}

// matchPath reports whether a request path matches a route's path pattern
// ({x} matches one segment).
func matchPath(pattern, path string) bool {
	ps, qs := strings.Split(pattern, "/"), strings.Split(path, "/")
	if len(ps) != len(qs) {
		return false
	}
	for i := range ps {
		if !(strings.HasPrefix(ps[i], "{") && qs[i] != "") && ps[i] != qs[i] {
			return false
		}
	}
	return true
}

func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, api.Health{Status: "ok", Version: s.cfg.ServerVersion})
}

// handleReadyz says which backend, if any, does not answer.
func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	if err := s.Ready(ctx); err != nil {
		// Name the backends that are down; the details (addresses, dial
		// errors) go to the log, not to an unauthenticated caller.
		s.logFor(r).WarnContext(r.Context(), "not ready", "err", err)
		writeJSON(w, http.StatusServiceUnavailable, api.Readiness{Status: "unavailable", Error: downBackends(err)})
		return
	}
	writeJSON(w, http.StatusOK, api.Readiness{Status: "ready"})
}

// readyTimeout bounds a readiness check.
const readyTimeout = 5 * time.Second

// downBackends says which backends Ready found down, by name only.
func downBackends(err error) string {
	var down *BackendsDownError
	if !errors.As(err, &down) {
		return "not answering"
	}
	return strings.Join(down.Backends, ", ") + " not answering"
}
