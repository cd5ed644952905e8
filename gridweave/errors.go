package gridweave

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"gridweave.dev/gridweave/api"
	"gridweave.dev/gridweave/fleet"
	"gridweave.dev/joinkeys"
	"gridweave.dev/mesh"
	"gridweave.dev/rayctl"
	"gridweave.dev/rayctl/dashboard"
)

// apiError is an answer other than 2xx, in the contract's shape:
// {"error": {"code", "message", "field"?, ...details}}.
type apiError struct {
	status  int
	code    string
	message string
	field   string
	details map[string]any
	header  map[string]string
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.status, e.code, e.message) }

func badField(field, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, code: "invalid_field", field: field, message: fmt.Sprintf(format, args...)}
}

var errUnauthenticated = &apiError{status: http.StatusUnauthorized, code: "unauthenticated", message: "missing or invalid credentials"}

// toAPIError is the one place errors become HTTP statuses: the fleet's
// and the ledger's errors, rayctl's, the Ray dashboard's (as
// dashboardFailure) and the Kubernetes API's, the same on every route.
// Anything it does not know is a 500 whose message hides the cause (it
// is logged).
func toAPIError(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	if e := fleetError(err); e != nil {
		return e
	}
	if e := ledgerError(err); e != nil {
		return e
	}
	var df *dashboardFailure
	if errors.As(err, &df) {
		return df.apiError()
	}
	// rayctl's sentinels and a deadline before the Kubernetes error they
	// may wrap (a write that kept meeting conflicts until its deadline is
	// a timeout, not a conflict).
	switch {
	case errors.Is(err, rayctl.ErrInvalidSpec):
		return &apiError{status: http.StatusUnprocessableEntity, code: "invalid_spec", field: invalidField(err), message: err.Error()}
	case errors.Is(err, rayctl.ErrGroupExists):
		return &apiError{status: http.StatusConflict, code: "worker_group_exists", message: err.Error()}
	case errors.Is(err, rayctl.ErrNotFound):
		return &apiError{status: http.StatusNotFound, code: "not_found", message: err.Error()}
	case errors.Is(err, context.DeadlineExceeded):
		return &apiError{status: http.StatusGatewayTimeout, code: "timeout", message: "the operation did not finish in time: " + err.Error()}
	}
	if e := kubernetesError(err); e != nil {
		return e
	}
	return &apiError{status: http.StatusInternalServerError, code: "internal", message: "internal error; see the server log for the request id"}
}

func fleetError(err error) *apiError {
	var fe *fleet.Error
	if errors.As(err, &fe) {
		switch {
		case errors.Is(fe.Kind, fleet.ErrCredentialRequired):
			return &apiError{status: http.StatusUnauthorized, code: "unauthenticated", field: fe.Field, message: fe.Message}
		case errors.Is(fe.Kind, fleet.ErrHostnameInCluster):
			return &apiError{status: http.StatusConflict, code: "hostname_in_cluster", field: fe.Field, message: fe.Message}
		case errors.Is(fe.Kind, fleet.ErrPublicKeyMismatch):
			return &apiError{status: http.StatusConflict, code: "public_key_mismatch", field: fe.Field, message: fe.Message}
		case errors.Is(fe.Kind, fleet.ErrPodCIDROutsideCluster):
			return &apiError{status: http.StatusConflict, code: "pod_cidr_outside_cluster", field: fe.Field, message: "this machine's Kubernetes Node has a pod CIDR the cluster did not give it: " + fe.Message}
		default:
			return &apiError{status: http.StatusBadRequest, code: "invalid_field", field: fe.Field, message: fe.Message}
		}
	}
	var vm *fleet.VersionMismatchError
	if errors.As(err, &vm) {
		return &apiError{
			status:  http.StatusUpgradeRequired,
			code:    "version_mismatch",
			message: vm.Error(),
			header:  map[string]string{"Upgrade": "gridweave-worker/" + vm.Server},
			details: map[string]any{"server_version": vm.Server, "min_version": vm.Min, "worker_version": vm.Worker},
		}
	}
	return nil
}

// ledgerStatuses are the ledger's sentinel errors, in the order they are
// tried.
var ledgerStatuses = []struct {
	err     error
	status  int
	code    string
	field   string
	message string // "" means the error's own text
}{
	{joinkeys.ErrKeyInvalid, http.StatusUnauthorized, "invalid_join_key", "key", "the join key is not valid"},
	{joinkeys.ErrKeyExpired, http.StatusUnauthorized, "join_key_expired", "key", "the join key has expired; ask an administrator for a new one"},
	{joinkeys.ErrKeyRevoked, http.StatusUnauthorized, "join_key_revoked", "key", "the join key was revoked"},
	{joinkeys.ErrKeyExhausted, http.StatusUnauthorized, "join_key_exhausted", "key", "the join key has no uses left"},
	{joinkeys.ErrKeyNotYetValid, http.StatusUnauthorized, "join_key_not_yet_valid", "key", "the join key is not valid yet (is this host's clock behind?)"},
	{joinkeys.ErrNodeTokenInvalid, http.StatusUnauthorized, "invalid_node_token", "", "the node token is not valid for this node"},
	{joinkeys.ErrNodeTokenRequired, http.StatusConflict, "node_token_required", "node_token", ""},
	{joinkeys.ErrNodeDisconnected, http.StatusConflict, "node_disconnected", "", ""},
	{joinkeys.ErrPublicKeyTaken, http.StatusConflict, "public_key_taken", "public_key", ""},
	{joinkeys.ErrPodCIDRConflict, http.StatusConflict, "pod_cidr_conflict", "", ""},
	{joinkeys.ErrNodeChanged, http.StatusConflict, "conflict", "", "the node was changed concurrently; try again"},
	{joinkeys.ErrPoolExhausted, http.StatusConflict, "vpn_pool_exhausted", "", "no VPN address is left for a new node; disconnect unused nodes or widen VPN_CIDR"},
	{joinkeys.ErrNodeNotFound, http.StatusNotFound, "node_not_found", "", ""},
	{joinkeys.ErrKeyNotFound, http.StatusNotFound, "join_key_not_found", "", "no join key has that id"},
}

func ledgerError(err error) *apiError {
	var fe *joinkeys.FieldError
	if errors.As(err, &fe) {
		return &apiError{status: http.StatusBadRequest, code: "invalid_field", field: fe.Field, message: fe.Error()}
	}
	var taken *joinkeys.HostnameTakenError
	if errors.As(err, &taken) {
		return &apiError{status: http.StatusConflict, code: "hostname_taken", field: "hostname", message: err.Error()}
	}
	var ipConflict *mesh.AllowedIPConflictError
	if errors.As(err, &ipConflict) {
		return &apiError{status: http.StatusConflict, code: "allowed_ip_conflict", message: "the node's addresses overlap another WireGuard peer's; an administrator must resolve it"}
	}
	for _, l := range ledgerStatuses {
		if !errors.Is(err, l.err) {
			continue
		}
		message := l.message
		switch {
		case message != "":
		case l.err == joinkeys.ErrNodeTokenRequired:
			message = err.Error() + "; present the node token from the first join, or have an administrator disconnect the node first"
		case l.err == joinkeys.ErrNodeDisconnected:
			message = err.Error() + " (an administrator's POST /v1/nodes/disconnect completes it)"
		default:
			message = err.Error()
		}
		return &apiError{status: l.status, code: l.code, field: l.field, message: message}
	}
	return nil
}

// kubernetesError maps an error of the Kubernetes API, whichever route
// met it. A refusal of the object names the first field at fault and
// lists every cause.
func kubernetesError(err error) *apiError {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return nil
	}
	st := status.Status()
	switch {
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		field, msg := "", err.Error()
		if st.Details != nil && len(st.Details.Causes) > 0 {
			field = st.Details.Causes[0].Field
			var parts []string
			for _, c := range st.Details.Causes {
				parts = append(parts, c.Field+": "+c.Message)
			}
			msg = strings.Join(parts, "; ")
		}
		return &apiError{status: http.StatusUnprocessableEntity, code: "rejected_by_kubernetes", field: field, message: msg}
	case apierrors.IsNotFound(err):
		return &apiError{status: http.StatusNotFound, code: "not_found", message: err.Error()}
	case apierrors.IsAlreadyExists(err):
		return &apiError{status: http.StatusConflict, code: "already_exists", message: err.Error()}
	case apierrors.IsConflict(err):
		return &apiError{status: http.StatusConflict, code: "conflict", message: "the object changed concurrently: " + err.Error()}
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		return &apiError{status: http.StatusBadGateway, code: "kubernetes_denied", message: "Kubernetes refused this service's credentials: " + err.Error()}
	case apierrors.IsTimeout(err), apierrors.IsServerTimeout(err), apierrors.IsTooManyRequests(err):
		return &apiError{status: http.StatusServiceUnavailable, code: "kubernetes_unavailable", message: err.Error()}
	}
	return nil
}

// dashboardFailure is an error met talking to the Ray dashboard (whose
// timeouts and network errors mean something other than the Kubernetes
// API's).
type dashboardFailure struct {
	err     error
	timeout time.Duration
}

func (d *dashboardFailure) Error() string { return d.err.Error() }
func (d *dashboardFailure) Unwrap() error { return d.err }

func (d *dashboardFailure) apiError() *apiError {
	err := d.err
	var apiErr *dashboard.APIError
	var netErr net.Error
	switch {
	case errors.Is(err, dashboard.ErrNotFound):
		return &apiError{status: http.StatusNotFound, code: "not_found", message: err.Error()}
	case errors.Is(err, dashboard.ErrImperativeApps):
		return &apiError{status: http.StatusConflict, code: "imperative_applications", message: err.Error() + "; delete them with serve.delete, or deploy everything declaratively first"}
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout()):
		return &apiError{status: http.StatusGatewayTimeout, code: "ray_dashboard_timeout", message: "the Ray dashboard did not answer within " + d.timeout.String()}
	case errors.As(err, &apiErr):
		return &apiError{status: http.StatusBadGateway, code: "ray_dashboard_error", message: err.Error()}
	}
	return &apiError{status: http.StatusBadGateway, code: "ray_dashboard_unreachable", message: "the Ray dashboard cannot be reached: " + err.Error()}
}

func invalidField(err error) string {
	var ise *rayctl.InvalidSpecError
	if errors.As(err, &ise) {
		return ise.Field
	}
	return ""
}

// writeError answers with e's status and body, logging 5xx with the cause.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := toAPIError(err)
	if e.status >= 500 {
		s.logFor(r).ErrorContext(r.Context(), "request failed", "status", e.status, "err", err)
	} else {
		s.logFor(r).DebugContext(r.Context(), "request refused", "status", e.status, "code", e.code)
	}
	for k, v := range e.header {
		w.Header().Set(k, v)
	}
	if e.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="gridweave"`)
	}
	writeJSON(w, e.status, api.ErrorBody{Error: api.Error{Code: e.code, Message: e.message, Field: e.field, Details: e.details}})
}

// logFor is the service's logger for lines about r: with r's request id,
// unless the logger's handler (LogHandler) adds it from the context.
func (s *Server) logFor(r *http.Request) *slog.Logger {
	if _, adds := s.log.Handler().(requestIDHandler); adds {
		return s.log
	}
	if id := requestID(r.Context()); id != "" {
		return s.log.With("request_id", id)
	}
	return s.log
}

// errorCodes are the codes each error status carries, as the OpenAPI
// document lists them (an enum per status): a test validates every
// answer the HTTP tests receive against the document, so a code missing
// here fails it.
var errorCodes = map[int][]string{
	http.StatusBadRequest:            {"invalid_json", "invalid_body", "invalid_field", "invalid_bundle"},
	http.StatusUnauthorized:          {"unauthenticated", "invalid_join_key", "join_key_expired", "join_key_revoked", "join_key_exhausted", "join_key_not_yet_valid", "invalid_node_token"},
	http.StatusForbidden:             {"forbidden", "internal_route", "outside_vpn", "from_the_fleet", "console_loopback_only"},
	http.StatusNotFound:              {"node_not_found", "join_key_not_found", "not_found", "no_such_route", "no_agent", "no_worker_image", "no_k3s", "through_the_tunnel"},
	http.StatusMethodNotAllowed:      {"method_not_allowed"},
	http.StatusConflict:              {"hostname_taken", "hostname_in_cluster", "node_token_required", "node_disconnected", "public_key_taken", "public_key_mismatch", "pod_cidr_conflict", "pod_cidr_outside_cluster", "allowed_ip_conflict", "vpn_pool_exhausted", "worker_group_exists", "already_exists", "conflict", "imperative_applications", "no_gpu_workers"},
	http.StatusRequestEntityTooLarge: {"body_too_large"},
	http.StatusUnsupportedMediaType:  {"unsupported_media_type"},
	http.StatusUnprocessableEntity:   {"invalid_spec", "rejected_by_kubernetes"},
	http.StatusUpgradeRequired:       {"version_mismatch"},
	http.StatusTooManyRequests:       {"rate_limited", "too_many_polls"},
	http.StatusBadGateway:            {"kubernetes_denied", "ray_dashboard_error", "ray_dashboard_unreachable"},
	http.StatusServiceUnavailable:    {"no_kubernetes", "no_ray_dashboard", "kubernetes_unavailable"},
	http.StatusGatewayTimeout:        {"timeout", "ray_dashboard_timeout"},
	http.StatusInternalServerError:   {"internal"},
}
