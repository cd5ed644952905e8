package gridweave

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"gridweave.dev/joinkeys"
	"gridweave.dev/mesh"
	"gridweave.dev/rayctl"
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

// toAPIError is the one place errors become HTTP statuses: the packages'
// sentinels, Kubernetes API errors and rayctl's errors. Anything it does
// not know is a 500 whose message hides the cause (it is logged).
func toAPIError(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	var fe *joinkeys.FieldError
	if errors.As(err, &fe) {
		return &apiError{status: 400, code: "invalid_field", field: fe.Field, message: fe.Error()}
	}
	var taken *joinkeys.HostnameTakenError
	if errors.As(err, &taken) {
		return &apiError{status: 409, code: "hostname_taken", field: "hostname", message: err.Error()}
	}
	var ipConflict *mesh.AllowedIPConflictError
	if errors.As(err, &ipConflict) {
		return &apiError{status: 409, code: "allowed_ip_conflict", message: "the node's addresses overlap another WireGuard peer's; an administrator must resolve it"}
	}
	switch {
	case errors.Is(err, joinkeys.ErrKeyInvalid):
		return &apiError{status: 401, code: "invalid_join_key", field: "key", message: "the join key is not valid"}
	case errors.Is(err, joinkeys.ErrKeyExpired):
		return &apiError{status: 401, code: "join_key_expired", field: "key", message: "the join key has expired; ask an administrator for a new one"}
	case errors.Is(err, joinkeys.ErrKeyRevoked):
		return &apiError{status: 401, code: "join_key_revoked", field: "key", message: "the join key was revoked"}
	case errors.Is(err, joinkeys.ErrKeyExhausted):
		return &apiError{status: 401, code: "join_key_exhausted", field: "key", message: "the join key has no uses left"}
	case errors.Is(err, joinkeys.ErrKeyNotYetValid):
		return &apiError{status: 401, code: "join_key_not_yet_valid", field: "key", message: "the join key is not valid yet (is this host's clock behind?)"}
	case errors.Is(err, joinkeys.ErrNodeTokenInvalid):
		return &apiError{status: 401, code: "invalid_node_token", message: "the node token is not valid for this node"}
	case errors.Is(err, joinkeys.ErrNodeTokenRequired):
		return &apiError{status: 409, code: "node_token_required", field: "node_token", message: err.Error() + "; present the node token from the first join, or have an administrator disconnect the node first"}
	case errors.Is(err, joinkeys.ErrNodeDisconnected):
		return &apiError{status: 409, code: "node_disconnected", message: err.Error() + " (an administrator's POST /v1/nodes/disconnect completes it)"}
	case errors.Is(err, joinkeys.ErrPublicKeyTaken):
		return &apiError{status: 409, code: "public_key_taken", field: "public_key", message: err.Error()}
	case errors.Is(err, joinkeys.ErrPodCIDRConflict):
		return &apiError{status: 409, code: "pod_cidr_conflict", message: err.Error()}
	case errors.Is(err, joinkeys.ErrNodeChanged):
		return &apiError{status: 409, code: "conflict", message: "the node was changed concurrently; try again"}
	case errors.Is(err, joinkeys.ErrPoolExhausted):
		return &apiError{status: 409, code: "vpn_pool_exhausted", message: "no VPN address is left for a new node; disconnect unused nodes or widen VPN_CIDR"}
	case errors.Is(err, joinkeys.ErrNodeNotFound):
		return &apiError{status: 404, code: "node_not_found", message: err.Error()}
	case errors.Is(err, joinkeys.ErrKeyNotFound):
		return &apiError{status: 404, code: "join_key_not_found", message: "no join key has that id"}
	case errors.Is(err, rayctl.ErrInvalidSpec):
		return &apiError{status: 422, code: "invalid_spec", field: invalidField(err), message: err.Error()}
	case errors.Is(err, rayctl.ErrGroupExists):
		return &apiError{status: 409, code: "worker_group_exists", message: err.Error()}
	case errors.Is(err, rayctl.ErrNotFound):
		return &apiError{status: 404, code: "not_found", message: err.Error()}
	case errors.Is(err, context.DeadlineExceeded):
		return &apiError{status: 504, code: "timeout", message: "the operation did not finish in time: " + err.Error()}
	}
	switch {
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return &apiError{status: 422, code: "rejected_by_kubernetes", message: err.Error()}
	case apierrors.IsNotFound(err):
		return &apiError{status: 404, code: "not_found", message: err.Error()}
	case apierrors.IsAlreadyExists(err):
		return &apiError{status: 409, code: "already_exists", message: err.Error()}
	case apierrors.IsConflict(err):
		return &apiError{status: 409, code: "conflict", message: "the object kept changing concurrently: " + err.Error()}
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		return &apiError{status: 502, code: "kubernetes_denied", message: "Kubernetes refused this service's credentials: " + err.Error()}
	case apierrors.IsTimeout(err), apierrors.IsServerTimeout(err), apierrors.IsTooManyRequests(err):
		return &apiError{status: 503, code: "kubernetes_unavailable", message: err.Error()}
	}
	return &apiError{status: 500, code: "internal", message: "internal error; see the server log for the request id"}
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
	body := map[string]any{"code": e.code, "message": e.message}
	if e.field != "" {
		body["field"] = e.field
	}
	for k, v := range e.details {
		body[k] = v
	}
	writeJSON(w, e.status, map[string]any{"error": body})
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
