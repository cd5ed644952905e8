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

// route is one entry of the API: method and path pattern, who may call
// it, and the handler. routes() is the whole surface on one screen; the
// OpenAPI document is built from the same table.
type route struct {
	pattern string // "METHOD /path/{param}"
	auth    authRule
	handler http.HandlerFunc
}

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
	return []route{
		{"GET /healthz", authNone, s.handleHealthz},
		{"GET /readyz", authNone, s.handleReadyz},
		{"GET /metrics", authAdmin, s.metrics.handler().ServeHTTP},
		{"GET /openapi.json", authNone, s.handleOpenAPI},
		{"GET /docs", authNone, s.handleDocs},
		{"GET /docs/{file}", authNone, s.handleDocsAsset},

		// The node side's downloads.
		{"GET /join-node.sh", authNone, s.handleJoinScript},
		{"GET /v1/nodes/agent/{os}/{arch}", authNone, s.handleAgent},
		{"GET /v1/nodes/agent/{os}/{arch}/sha256", authNone, s.handleAgentSum},
		{"GET /v1/nodes/worker-image", authNone, s.handleWorkerImage},
		{"GET /v1/nodes/worker-image/sha256", authNone, s.handleWorkerImageSum},
		{"GET /v1/nodes/agent/{os}/{arch}/k3s", authNone, s.handleK3s},
		{"GET /v1/nodes/agent/{os}/{arch}/k3s/sha256", authNone, s.handleK3sSum},
		{"GET /v1/nodes/agent/{os}/{arch}/kubelet", authNone, s.handleKubelet},
		{"GET /v1/nodes/agent/{os}/{arch}/kubelet/sha256", authNone, s.handleKubeletSum},

		// The join flow (docs/api.md).
		{"POST /v1/nodes/join-keys", authAdmin, s.handleMintKey},
		{"GET /v1/nodes/join-keys", authAdmin, s.handleListKeys},
		{"DELETE /v1/nodes/join-keys/{id}", authAdmin, s.handleRevokeKey},
		{"POST /v1/nodes/validate", authBodyCredential, s.handleValidate},
		{"POST /v1/nodes/register", authBodyCredential, s.handleRegister},
		{"POST /v1/nodes/disconnect", authAdmin, s.handleDisconnect},
		{"POST /v1/nodes/leave", authNodeToken, s.handleLeave},
		{"POST /v1/nodes/verify-provider", authProvider, s.handleVerifyProvider},
		{"POST /v1/nodes/report-version", authNodeToken, s.handleReportVersion},
		{"GET /v1/nodes/peers", authNodeToken, s.handlePeers},
		{"POST /v1/nodes/links", authNodeToken, s.handleReportLinks},
		{"GET /v1/nodes", authAdmin, s.handleListNodes},
		{"GET /v1/nodes/{hostname}", authAdmin, s.handleGetNode},
		{"GET /v1/nodes/{hostname}/links", authAdmin, s.handleNodeLinks},
		{"GET /v1/nodes/{hostname}/audit", authAdmin, s.handleNodeAudit},
		{"GET /v1/nodes/{hostname}/kubernetes", authAdmin, s.handleNodeKubernetes},
		{"GET /v1/nodes/history", authAdmin, s.handleFleetHistory},

		// The web console's page and files (its data comes from the API).
		{"GET /ui/", authNone, s.handleConsole},
		{"GET /ui/{file}", authNone, s.handleConsole},

		// RayClusters.
		{"POST /v1/kuberay/clusters", authAdmin, s.handleCreateCluster},
		{"GET /v1/kuberay/clusters", authAdmin, s.handleListClusters},
		{"GET /v1/kuberay/clusters/{name}", authAdmin, s.handleGetCluster},
		{"DELETE /v1/kuberay/clusters/{name}", authAdmin, s.handleDeleteCluster},
		{"PATCH /v1/kuberay/clusters/{name}/scale", authAdmin, s.handleScale},
		{"POST /v1/kuberay/clusters/{name}/worker-groups", authAdmin, s.handleAddWorkerGroup},
		{"POST /v1/kuberay/clusters/{name}/worker-groups-raw", authAdmin, s.handleAddWorkerGroupRaw},
		{"GET /v1/kuberay/clusters/{name}/workers", authAdmin, s.handleListWorkers},
		{"GET /v1/kuberay/clusters/{name}/worker-groups", authAdmin, s.handleListWorkerGroups},
		{"GET /v1/kuberay/clusters/{name}/worker-groups/{group}/logs", authAdmin, s.handleGroupLogs},
		{"DELETE /v1/kuberay/clusters/{name}/worker-groups/{group}", authAdmin, s.handleRemoveWorkerGroup},
		{"DELETE /v1/kuberay/clusters/{name}/worker-groups/{group}/pods", authAdmin, s.handleDeleteGroupPods},
		{"POST /v1/kuberay/clusters/{name}/swap-worker-groups", authAdmin, s.handleSwapWorkerGroups},
		{"POST /v1/kuberay/clusters/{name}/replace-worker-groups", authAdmin, s.handleReplaceWorkerGroups},

		// The gateway's hands (internal: INTERNAL_TOKEN on this listener,
		// none on INTERNAL_ADDR's).
		{"POST /v1/crd/jobs", authInternal, s.crdCreate(jobKind)},
		{"GET /v1/crd/jobs", authInternal, s.crdList(jobKind)},
		{"GET /v1/crd/jobs/{name}", authInternal, s.crdGet(jobKind)},
		{"PATCH /v1/crd/jobs/{name}", authInternal, s.crdPatch(jobKind, false)},
		{"PATCH /v1/crd/jobs/{name}/status", authInternal, s.crdPatch(jobKind, true)},
		{"DELETE /v1/crd/jobs/{name}", authInternal, s.crdDelete(jobKind)},
		{"POST /v1/crd/endpoints", authInternal, s.crdCreate(endpointKind)},
		{"GET /v1/crd/endpoints", authInternal, s.crdList(endpointKind)},
		{"GET /v1/crd/endpoints/by-name/{name}", authInternal, s.handleEndpointByName},
		{"GET /v1/crd/endpoints/{name}", authInternal, s.crdGet(endpointKind)},
		{"PATCH /v1/crd/endpoints/{name}", authInternal, s.crdPatch(endpointKind, false)},
		{"PATCH /v1/crd/endpoints/{name}/status", authInternal, s.crdPatch(endpointKind, true)},
		{"DELETE /v1/crd/endpoints/{name}", authInternal, s.crdDelete(endpointKind)},
		{"GET /v1/ray/serve/statuses", authInternal, s.handleServeStatuses},
		{"POST /v1/kubetorch/sync", authAdmin, s.handleSync},
		{"GET /v1/kubetorch/bundles/{file}", authNone, s.handleBundle},
		{"POST /v1/kubetorch/train", authAdmin, s.handleTrain},
		{"GET /v1/kubetorch/health", authAdmin, s.handleKubeTorchHealth},
		{"GET /v1/kubetorch/jobs", authUser, s.handleKubeTorchJobs},
		{"GET /v1/kubetorch/jobs/{id}", authUser, s.handleKubeTorchJob},
		{"DELETE /v1/ray/serve/applications/{app}", authInternal, s.handleDeleteServeApplication},
	}
}

// vpnRoutes are what the VPN listener (Config.VPNURL) serves, with the
// same credentials as on the public one: the calls a joined node makes
// through its tunnel, and the KubeTorch bundles its Ray workers fetch.
var vpnRoutes = map[string]bool{
	"GET /healthz":                                   true,
	"POST /v1/nodes/register":                        true,
	"POST /v1/nodes/report-version":                  true,
	"POST /v1/nodes/leave":                           true,
	"GET /v1/nodes/peers":                            true,
	"POST /v1/nodes/links":                           true,
	"GET /v1/nodes/worker-image":                     true,
	"GET /v1/nodes/worker-image/sha256":              true,
	"GET /v1/nodes/agent/{os}/{arch}/k3s":            true,
	"GET /v1/nodes/agent/{os}/{arch}/k3s/sha256":     true,
	"GET /v1/nodes/agent/{os}/{arch}/kubelet":        true,
	"GET /v1/nodes/agent/{os}/{arch}/kubelet/sha256": true,
	bundleRoute: true,
}

// tunnelDownloads are the large downloads only a joined machine needs:
// once the VPN listener is configured (Config.VPNURL) they are served
// there alone, through a machine's tunnel, and the public listener
// answers 404 for them (they are open without credentials, multi-GB, and
// answer Range requests).
var tunnelDownloads = map[string]bool{
	"GET /v1/nodes/worker-image":                     true,
	"GET /v1/nodes/worker-image/sha256":              true,
	"GET /v1/nodes/agent/{os}/{arch}/k3s":            true,
	"GET /v1/nodes/agent/{os}/{arch}/k3s/sha256":     true,
	"GET /v1/nodes/agent/{os}/{arch}/kubelet":        true,
	"GET /v1/nodes/agent/{os}/{arch}/kubelet/sha256": true,
}

// bundleRoute serves bundles at their unguessable URLs without
// credentials: on the VPN and internal listeners only, never to the
// world on the public one.
const bundleRoute = "GET /v1/kubetorch/bundles/{file}"

// routes builds the public handler (the whole table but the bundles), the
// internal one (the internal routes and metrics without credentials, and
// the bundles) and the VPN one (vpnRoutes), each behind the middleware
// chain.
func (s *Server) routes() (public, internal, vpn http.Handler) {
	mux := http.NewServeMux()
	vmux := http.NewServeMux()
	var vpnTable []route
	for _, rt := range s.routeTable() {
		h := http.Handler(rt.handler)
		if rt.pattern == bundleRoute {
			vmux.Handle(rt.pattern, s.named(rt.pattern, h))
			vpnTable = append(vpnTable, rt)
			mux.Handle(rt.pattern, s.named(rt.pattern, http.HandlerFunc(s.bundleNotHere)))
			continue
		}
		switch rt.auth {
		case authAdmin:
			h = s.requireRole(h, RoleAdmin)
		case authProvider:
			h = s.requireRole(h, RoleProvider)
		case authInternal:
			h = s.requireInternalToken(h)
		case authUser:
			h = s.requireRole(h, RoleAdmin, RoleUser)
		}
		if tunnelDownloads[rt.pattern] && s.cfg.VPNURL != "" {
			mux.Handle(rt.pattern, s.named(rt.pattern, http.HandlerFunc(s.downloadNotHere)))
		} else {
			mux.Handle(rt.pattern, s.named(rt.pattern, h))
		}
		if vpnRoutes[rt.pattern] {
			vmux.Handle(rt.pattern, s.named(rt.pattern, h))
			vpnTable = append(vpnTable, rt)
		}
	}
	mux.Handle("/", s.named("unmatched", s.notFound(s.routeTable())))
	public = chain(mux, withRequestID, s.withAccessLog, s.withCORS, s.withRateLimit, s.withBodyLimit)
	vmux.Handle("/", s.named("unmatched", s.notFound(vpnTable)))
	vpn = chain(vmux, withRequestID, s.withAccessLog, s.throughTunnelOnly, s.withRateLimit, s.withBodyLimit)

	imux := http.NewServeMux()
	imux.Handle("GET /metrics", s.named("GET /metrics", s.metrics.handler()))
	imux.Handle("GET /healthz", s.named("GET /healthz", http.HandlerFunc(s.handleHealthz)))
	var internalRoutes []route
	for _, rt := range s.routeTable() {
		if rt.auth == authInternal || rt.pattern == bundleRoute {
			imux.Handle(rt.pattern, s.named(rt.pattern, rt.handler))
			internalRoutes = append(internalRoutes, rt)
		}
	}
	imux.Handle("/", s.named("unmatched", s.notFound(internalRoutes)))
	internal = chain(imux, withRequestID, s.withAccessLog, s.notFromTheFleet, s.withBodyLimit)
	return public, internal, vpn
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

// bundleNotHere is the public listener's answer for a bundle: they are
// fetched through the tunnel or from the internal listener.
func (s *Server) bundleNotHere(w http.ResponseWriter, r *http.Request) {
	s.writeError(w, r, &apiError{code: api.CodeNotFound,
		message: "bundles are served on the VPN listener (http://MASTER_VPN_IP:VPN_HTTP_PORT, reached through a node's tunnel) and the internal listener, not on the public one"})
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
