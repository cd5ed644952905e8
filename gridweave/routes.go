package gridweave

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"

	"gridweave.dev/gridweave/api"
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
	// pathFirst, on a typed route, checks the path's values before the
	// body is read: a bad name is the answer, whatever the body.
	pathFirst func(*http.Request) error
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
		if rt.pathFirst != nil {
			if err := rt.pathFirst(r); err != nil {
				a.writeError(w, r, err)
				return
			}
		}
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
	authInternal authRule = "internal" // the internal token here; none on the internal listener
	// authBodyCredential: a join key or node token in the body (checked
	// by the fleet).
	authBodyCredential authRule = "join key or node token in the body"
	// authNodeToken: the node's token as the bearer (checked by the fleet;
	// a valid credential of another role is 403).
	authNodeToken authRule = "node token as bearer"
)

func (s *Server) routeTable() []route {
	return slices.Concat(s.serviceRoutes(), s.nodes.routes(), s.pages.routes(), s.downloads.routes(), s.clusters.routes(), s.crd.routes(), s.kubetorch.routes(), s.serve.routes())
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

		// The web console's page and files (its data comes from the API).

		// The gateway's hands (internal: the internal token on this
		// listener, none on the internal listener).
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
// address is in the VPN range or the cluster's pod range: a joined machine can
// route any address of the master into its tunnel (it widens its own
// master peer's allowed IPs) and Linux delivers the packet to whichever
// local address it names, so an internal listener on a bridge would otherwise
// answer every machine and every pod without a credential.
func (s *Server) notFromTheFleet(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ip, err := netip.ParseAddr(clientIP(r))
		if err != nil || s.cfg.VPNCIDR.Contains(ip.Unmap()) || s.fleet.PodRange().Cluster.Contains(ip.Unmap()) {
			s.writeError(w, r, &apiError{code: api.CodeFromTheFleet,
				message: "the internal listener does not answer callers from the WireGuard tunnels (" + s.cfg.Name("VPNCIDR") + ") or the cluster's pods (" + s.cfg.Name("ClusterCIDR") + "); use the public listener with " + s.cfg.Name("InternalToken")})
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
			s.writeError(w, r, &apiError{code: api.CodeOutsideVPN, message: "this listener answers only through the WireGuard tunnel (callers inside " + s.cfg.Name("VPNCIDR") + "); use the public listener"})
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
		message: "this is served on the VPN listener (the master's VPN address, reached through a node's tunnel) and the internal listener, not on the public one"})
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
