package gridweave

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"gridweave.dev/gridweave/api"
)

// route is one entry of the API: method and path pattern, who may call
// it, and the handler. routes() is the whole surface on one screen; the
// OpenAPI document is checked against the same table.
type route struct {
	pattern string // "METHOD /path/{param}"
	auth    string // "admin", "user" (or admin), "join key", "node token", "provider", "internal", "none"
	handler http.HandlerFunc
}

func (s *Server) routeTable() []route {
	return []route{
		{"GET /healthz", "none", s.handleHealthz},
		{"GET /readyz", "none", s.handleReadyz},
		{"GET /metrics", "admin", s.metrics.handler().ServeHTTP},
		{"GET /openapi.json", "none", s.handleOpenAPI},
		{"GET /docs", "none", s.handleDocs},
		{"GET /docs/{file}", "none", s.handleDocsAsset},

		// The node side's downloads.
		{"GET /join-node.sh", "none", s.handleJoinScript},
		{"GET /v1/nodes/agent/{os}/{arch}", "none", s.handleAgent},
		{"GET /v1/nodes/agent/{os}/{arch}/sha256", "none", s.handleAgentSum},
		{"GET /v1/nodes/worker-image", "none", s.handleWorkerImage},
		{"GET /v1/nodes/worker-image/sha256", "none", s.handleWorkerImageSum},

		// The join flow (DESIGN.md, "The join flow (wire contract)").
		{"POST /v1/nodes/join-keys", "admin", s.handleMintKey},
		{"GET /v1/nodes/join-keys", "admin", s.handleListKeys},
		{"DELETE /v1/nodes/join-keys/{id}", "admin", s.handleRevokeKey},
		{"POST /v1/nodes/validate", "join key", s.handleValidate},
		{"POST /v1/nodes/register", "join key", s.handleRegister},
		{"POST /v1/nodes/disconnect", "admin", s.handleDisconnect},
		{"POST /v1/nodes/leave", "node token", s.handleLeave},
		{"POST /v1/nodes/verify-provider", "provider", s.handleVerifyProvider},
		{"POST /v1/nodes/report-version", "node token", s.handleReportVersion},
		{"GET /v1/nodes", "admin", s.handleListNodes},
		{"GET /v1/nodes/{hostname}", "admin", s.handleGetNode},

		// RayClusters (seed 000's clusters table).
		{"POST /v1/kuberay/clusters", "admin", s.handleCreateCluster},
		{"GET /v1/kuberay/clusters", "admin", s.handleListClusters},
		{"GET /v1/kuberay/clusters/{name}", "admin", s.handleGetCluster},
		{"DELETE /v1/kuberay/clusters/{name}", "admin", s.handleDeleteCluster},
		{"PATCH /v1/kuberay/clusters/{name}/scale", "admin", s.handleScale},
		{"POST /v1/kuberay/clusters/{name}/worker-groups", "admin", s.handleAddWorkerGroup},
		{"POST /v1/kuberay/clusters/{name}/worker-groups-raw", "admin", s.handleAddWorkerGroupRaw},
		{"GET /v1/kuberay/clusters/{name}/workers", "admin", s.handleListWorkers},
		{"GET /v1/kuberay/clusters/{name}/worker-groups", "admin", s.handleListWorkerGroups},
		{"GET /v1/kuberay/clusters/{name}/worker-groups/{group}/logs", "admin", s.handleGroupLogs},
		{"DELETE /v1/kuberay/clusters/{name}/worker-groups/{group}", "admin", s.handleRemoveWorkerGroup},
		{"DELETE /v1/kuberay/clusters/{name}/worker-groups/{group}/pods", "admin", s.handleDeleteGroupPods},
		{"POST /v1/kuberay/clusters/{name}/swap-worker-groups", "admin", s.handleSwapWorkerGroups},
		{"POST /v1/kuberay/clusters/{name}/replace-worker-groups", "admin", s.handleReplaceWorkerGroups},

		// The gateway's hands (internal: INTERNAL_TOKEN on this listener,
		// none on INTERNAL_ADDR's).
		{"POST /v1/crd/jobs", "internal", s.crdCreate(jobKind)},
		{"GET /v1/crd/jobs", "internal", s.crdList(jobKind)},
		{"GET /v1/crd/jobs/{name}", "internal", s.crdGet(jobKind)},
		{"PATCH /v1/crd/jobs/{name}", "internal", s.crdPatch(jobKind, false)},
		{"PATCH /v1/crd/jobs/{name}/status", "internal", s.crdPatch(jobKind, true)},
		{"DELETE /v1/crd/jobs/{name}", "internal", s.crdDelete(jobKind)},
		{"POST /v1/crd/endpoints", "internal", s.crdCreate(endpointKind)},
		{"GET /v1/crd/endpoints", "internal", s.crdList(endpointKind)},
		{"GET /v1/crd/endpoints/by-name/{name}", "internal", s.handleEndpointByName},
		{"GET /v1/crd/endpoints/{name}", "internal", s.crdGet(endpointKind)},
		{"PATCH /v1/crd/endpoints/{name}", "internal", s.crdPatch(endpointKind, false)},
		{"PATCH /v1/crd/endpoints/{name}/status", "internal", s.crdPatch(endpointKind, true)},
		{"DELETE /v1/crd/endpoints/{name}", "internal", s.crdDelete(endpointKind)},
		{"GET /v1/ray/serve/statuses", "internal", s.handleServeStatuses},
		{"POST /v1/kubetorch/sync", "admin", s.handleSync},
		{"GET /v1/kubetorch/bundles/{file}", "none", s.handleBundle},
		{"POST /v1/kubetorch/train", "admin", s.handleTrain},
		{"GET /v1/kubetorch/health", "admin", s.handleKubeTorchHealth},
		{"GET /v1/kubetorch/jobs/{id}", "user", s.handleKubeTorchJob},
		{"DELETE /v1/ray/serve/applications/{app}", "internal", s.handleDeleteServeApplication},
	}
}

// routes builds the public handler (the whole table) and the internal one
// (metrics without credentials), each behind the middleware chain.
func (s *Server) routes() (public, internal http.Handler) {
	mux := http.NewServeMux()
	for _, rt := range s.routeTable() {
		h := http.Handler(rt.handler)
		switch rt.auth {
		case "admin":
			h = s.requireRole(h, RoleAdmin)
		case "provider":
			h = s.requireRole(h, RoleProvider)
		case "internal":
			h = s.requireInternalToken(h)
		case "user":
			h = s.requireRole(h, RoleAdmin, RoleUser)
		}
		mux.Handle(rt.pattern, s.named(rt.pattern, h))
	}
	mux.Handle("/", s.named("unmatched", s.notFound(s.routeTable())))
	public = chain(mux, withRequestID, s.withAccessLog, s.withCORS, s.withRateLimit, s.withBodyLimit)

	imux := http.NewServeMux()
	imux.Handle("GET /metrics", s.named("GET /metrics", s.metrics.handler()))
	imux.Handle("GET /healthz", s.named("GET /healthz", http.HandlerFunc(s.handleHealthz)))
	var internalRoutes []route
	for _, rt := range s.routeTable() {
		if rt.auth == "internal" {
			imux.Handle(rt.pattern, s.named(rt.pattern, rt.handler))
			internalRoutes = append(internalRoutes, rt)
		}
	}
	imux.Handle("/", s.named("unmatched", s.notFound(internalRoutes)))
	internal = chain(imux, withRequestID, s.withAccessLog, s.withBodyLimit)
	return public, internal
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
		s.writeError(w, r, &apiError{status: http.StatusMethodNotAllowed, code: "method_not_allowed", message: r.Method + " is not allowed on " + r.URL.Path + "; use " + strings.Join(allowed, ", ")})
		return
	}
	s.writeError(w, r, &apiError{status: http.StatusNotFound, code: "no_such_route", message: "no route " + r.Method + " " + r.URL.Path})
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
	var names []string
	for _, name := range []string{"ledger", "wireguard", "kubernetes"} {
		if strings.Contains(err.Error(), name+":") {
			names = append(names, name)
		}
	}
	return strings.Join(names, ", ") + " not answering"
}
