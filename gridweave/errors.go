package gridweave

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"gridweave.dev/gridweave/api"
	"gridweave.dev/gridweave/fleet"
	"gridweave.dev/gridweave/kubetorch"
	"gridweave.dev/joinkeys"
	"gridweave.dev/joinkeys/leaderstore"
	"gridweave.dev/mesh"
	"gridweave.dev/rayctl"
	"gridweave.dev/rayctl/dashboard"
)

// apiError is an answer other than 2xx, in the contract's shape:
// {"error": {"code", "message", "field"?, ...details}}.
type apiError struct {
	code    string // its status is api.ErrorStatus's
	message string
	field   string
	details map[string]any
	header  map[string]string
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.status(), e.code, e.message) }

// status is the HTTP status of the error's code (api.ErrorStatus): one
// table decides, the OpenAPI document lists and clients read.
func (e *apiError) status() int {
	if status, ok := api.ErrorStatus[e.code]; ok {
		return status
	}
	return http.StatusInternalServerError
}

func badField(field, format string, args ...any) *apiError {
	return &apiError{code: api.CodeInvalidField, field: field, message: fmt.Sprintf(format, args...)}
}

var errUnauthenticated = &apiError{code: api.CodeUnauthenticated, message: "missing or invalid credentials"}

// toAPIError is the one place errors become error codes (api.ErrorCodes
// gives their statuses): the fleet's and the ledger's errors, rayctl's,
// the Ray dashboard's (as dashboardFailure) and the Kubernetes API's, the
// same on every route.
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
	if e := kubetorchError(err); e != nil {
		return e
	}
	// rayctl's sentinels and a deadline before the Kubernetes error they
	// may wrap (a write that kept meeting conflicts until its deadline is
	// a timeout, not a conflict).
	switch {
	case errors.Is(err, rayctl.ErrInvalidSpec):
		return &apiError{code: api.CodeInvalidSpec, field: invalidField(err), message: err.Error()}
	case errors.Is(err, rayctl.ErrGroupExists):
		return &apiError{code: api.CodeWorkerGroupExists, message: err.Error()}
	case errors.Is(err, rayctl.ErrNotFound):
		return &apiError{code: api.CodeNotFound, message: err.Error()}
	case errors.Is(err, context.DeadlineExceeded):
		return &apiError{code: api.CodeTimeout, message: "the operation did not finish in time: " + err.Error()}
	}
	if e := kubernetesError(err); e != nil {
		return e
	}
	return &apiError{code: api.CodeInternal, message: "internal error; see the server log for the request id"}
}

func fleetError(err error) *apiError {
	var fe *fleet.Error
	if errors.As(err, &fe) {
		switch {
		case errors.Is(fe.Kind, fleet.ErrCredentialRequired):
			return &apiError{code: api.CodeUnauthenticated, field: fe.Field, message: fe.Message}
		case errors.Is(fe.Kind, fleet.ErrHostnameInCluster):
			return &apiError{code: api.CodeHostnameInCluster, field: fe.Field, message: fe.Message}
		case errors.Is(fe.Kind, fleet.ErrPublicKeyMismatch):
			return &apiError{code: api.CodePublicKeyMismatch, field: fe.Field, message: fe.Message}
		case errors.Is(fe.Kind, fleet.ErrPodCIDROutsideCluster):
			return &apiError{code: api.CodePodCIDROutsideCluster, field: fe.Field, message: "this machine's Kubernetes Node has a pod CIDR the cluster did not give it: " + fe.Message}
		default:
			return &apiError{code: api.CodeInvalidField, field: fe.Field, message: fe.Message}
		}
	}
	var vm *fleet.VersionMismatchError
	if errors.As(err, &vm) {
		return &apiError{
			code:    api.CodeVersionMismatch,
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
	code    string
	field   string
	message string // "" means the error's own text
}{
	{joinkeys.ErrKeyInvalid, api.CodeInvalidJoinKey, "key", "the join key is not valid"},
	{joinkeys.ErrKeyExpired, api.CodeJoinKeyExpired, "key", "the join key has expired; ask an administrator for a new one"},
	{joinkeys.ErrKeyRevoked, api.CodeJoinKeyRevoked, "key", "the join key was revoked"},
	{joinkeys.ErrKeyExhausted, api.CodeJoinKeyExhausted, "key", "the join key has no uses left"},
	{joinkeys.ErrKeyNotYetValid, api.CodeJoinKeyNotYetValid, "key", "the join key is not valid yet (is this host's clock behind?)"},
	{joinkeys.ErrNodeTokenInvalid, api.CodeInvalidNodeToken, "", "the node token is not valid for this node"},
	{joinkeys.ErrNodeTokenRequired, api.CodeNodeTokenRequired, "node_token", ""},
	{joinkeys.ErrNodeDisconnected, api.CodeNodeDisconnected, "", ""},
	{joinkeys.ErrPublicKeyTaken, api.CodePublicKeyTaken, "public_key", ""},
	{joinkeys.ErrPodCIDRConflict, api.CodePodCIDRConflict, "", ""},
	{joinkeys.ErrNodeChanged, api.CodeConflict, "", "the node was changed concurrently; try again"},
	{joinkeys.ErrPoolExhausted, api.CodeVPNPoolExhausted, "", "no VPN address is left for a new node; disconnect unused nodes or widen the master's VPN range"},
	{joinkeys.ErrNodeNotFound, api.CodeNodeNotFound, "", ""},
	{joinkeys.ErrKeyNotFound, api.CodeJoinKeyNotFound, "", "no join key has that id"},
	{leaderstore.ErrLeaderUnavailable, api.CodeLedgerUnavailable, "", ""},
	{joinkeys.ErrFenced, api.CodeLedgerUnavailable, "", "this replica lost the lead while writing; nothing was written: try again"},
}

func ledgerError(err error) *apiError {
	var fe *joinkeys.FieldError
	if errors.As(err, &fe) {
		return &apiError{code: api.CodeInvalidField, field: fe.Field, message: fe.Error()}
	}
	var taken *joinkeys.HostnameTakenError
	if errors.As(err, &taken) {
		return &apiError{code: api.CodeHostnameTaken, field: "hostname", message: err.Error()}
	}
	var ipConflict *mesh.AllowedIPConflictError
	if errors.As(err, &ipConflict) {
		return &apiError{code: api.CodeAllowedIPConflict, message: "the node's addresses overlap another WireGuard peer's; an administrator must resolve it"}
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
		return &apiError{code: l.code, field: l.field, message: message}
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
		return &apiError{code: api.CodeRejectedByKubernetes, field: field, message: msg}
	case apierrors.IsNotFound(err):
		return &apiError{code: api.CodeNotFound, message: err.Error()}
	case apierrors.IsAlreadyExists(err):
		return &apiError{code: api.CodeAlreadyExists, message: err.Error()}
	case apierrors.IsConflict(err):
		return &apiError{code: api.CodeConflict, message: "the object changed concurrently: " + err.Error()}
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		return &apiError{code: api.CodeKubernetesDenied, message: "Kubernetes refused this service's credentials: " + err.Error()}
	case apierrors.IsTimeout(err), apierrors.IsServerTimeout(err), apierrors.IsTooManyRequests(err):
		return &apiError{code: api.CodeKubernetesUnavailable, message: err.Error()}
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
		return &apiError{code: api.CodeNotFound, message: err.Error()}
	case errors.Is(err, dashboard.ErrImperativeApps):
		return &apiError{code: api.CodeImperativeApplications, message: err.Error() + "; delete them with serve.delete, or deploy everything declaratively first"}
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout()):
		return &apiError{code: api.CodeRayDashboardTimeout, message: "the Ray dashboard did not answer within " + d.timeout.String()}
	case errors.As(err, &apiErr):
		return &apiError{code: api.CodeRayDashboardError, message: err.Error()}
	}
	return &apiError{code: api.CodeRayDashboardUnreachable, message: "the Ray dashboard cannot be reached: " + err.Error()}
}

func invalidField(err error) string {
	var ise *rayctl.InvalidSpecError
	if errors.As(err, &ise) {
		return ise.Field
	}
	return ""
}

// encoded is e's body in the contract's shape.
func (e *apiError) encoded() []byte {
	raw, _ := json.Marshal(api.ErrorBody{Error: api.Error{Code: e.code, Message: e.message, Field: e.field, Details: e.details}})
	return raw
}

// responder answers errors in the contract's shape and logs them: the
// server and each group of routes answer through one.
type responder struct{ log *slog.Logger }

// writeError answers with e's status and body, logging 5xx with the cause.
func (s responder) writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := toAPIError(err)
	if e.status() >= 500 {
		s.logFor(r).ErrorContext(r.Context(), "request failed", "status", e.status(), "err", err)
	} else {
		s.logFor(r).DebugContext(r.Context(), "request refused", "status", e.status(), "code", e.code)
	}
	for k, v := range e.header {
		w.Header().Set(k, v)
	}
	if e.status() == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="gridweave"`)
	}
	writeJSON(w, e.status(), api.ErrorBody{Error: api.Error{Code: e.code, Message: e.message, Field: e.field, Details: e.details}})
}

// logFor is the service's logger for lines about r: with r's request id,
// unless the logger's handler (LogHandler) adds it from the context.
func (s responder) logFor(r *http.Request) *slog.Logger {
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
var errorCodes = func() map[int][]string {
	m := map[int][]string{}
	for _, c := range api.ErrorCodes {
		m[c.Status] = append(m[c.Status], c.Code)
	}
	return m
}()

// The codes each source of errors can give, as toAPIError maps them: a
// route that reaches a source declares its codes (operation.codes), and
// TestCodeGroupsCoverTheirMappings feeds each source's errors through
// toAPIError to hold these lists to the mapping.
var (
	// kubernetesCodes: the Kubernetes API's (kubernetesError), and a
	// deadline met waiting on it.
	kubernetesCodes = []string{api.CodeRejectedByKubernetes, api.CodeNotFound, api.CodeAlreadyExists, api.CodeConflict,
		api.CodeKubernetesDenied, api.CodeKubernetesUnavailable, api.CodeTimeout}
	// ledgerCodes: the node ledger's and the join keys' (ledgerError),
	// and the Kubernetes API's when the ledger is kept there
	// (joinkeys/kubestore passes its errors through).
	ledgerCodes = func() []string {
		codes := slices.Concat([]string{api.CodeInvalidField, api.CodeHostnameTaken, api.CodeAllowedIPConflict}, kubernetesCodes)
		for _, l := range ledgerStatuses {
			codes = append(codes, l.code)
		}
		return codes
	}()
	// rayctlCodes: the RayCluster operations' (rayctl's sentinels), over
	// the Kubernetes API.
	rayctlCodes = slices.Concat([]string{api.CodeInvalidSpec, api.CodeWorkerGroupExists, api.CodeNotFound, api.CodeTimeout}, kubernetesCodes)
	// fleetCodes: the node lifecycle's (fleetError), which reaches the
	// ledger, the mesh, the Kubernetes Nodes and the RayCluster's worker
	// groups.
	fleetCodes = slices.Concat([]string{api.CodeUnauthenticated, api.CodeHostnameInCluster, api.CodePublicKeyMismatch,
		api.CodePodCIDROutsideCluster, api.CodeInvalidField, api.CodeVersionMismatch}, ledgerCodes, rayctlCodes)
	// dashboardCodes: the Ray dashboard's (dashboardFailure).
	dashboardCodes = []string{api.CodeNotFound, api.CodeImperativeApplications, api.CodeRayDashboardTimeout,
		api.CodeRayDashboardError, api.CodeRayDashboardUnreachable}
	// crdCodes: the CRD proxy's, over the Kubernetes API (none without
	// one).
	crdCodes = slices.Concat([]string{api.CodeNoKubernetes, api.CodeNotFound}, kubernetesCodes)
	// kubetorchCodes: KubeTorch training's (kubetorchError), which reaches
	// the dashboard and Kubernetes.
	kubetorchCodes = slices.Concat([]string{api.CodeInvalidField, api.CodeNoGPUWorkers, api.CodeNoRayDashboard,
		api.CodeNotFound, api.CodeNoKubernetes}, dashboardCodes, kubernetesCodes)
)

// kubetorchError maps KubeTorch training's errors; nil for others.
func kubetorchError(err error) *apiError {
	var fe *kubetorch.FieldError
	var de *kubetorch.DashboardError
	switch {
	case errors.As(err, &fe):
		return badField(fe.Field, "%s", fe.Problem)
	case errors.As(err, &de):
		return (&dashboardFailure{err: de.Err, timeout: de.Timeout}).apiError()
	case errors.Is(err, kubetorch.ErrNoGPUWorkers):
		return &apiError{code: api.CodeNoGPUWorkers, message: err.Error()}
	case errors.Is(err, kubetorch.ErrNoDashboard):
		return &apiError{code: api.CodeNoRayDashboard, message: "the Ray proxy is off: this server was given no Ray dashboard URL"}
	case errors.Is(err, kubetorch.ErrJobNotFound):
		return &apiError{code: api.CodeNotFound, message: err.Error()}
	case errors.Is(err, kubetorch.ErrNoJobRecord):
		return &apiError{code: api.CodeNoKubernetes, message: "the CRD proxy needs a Kubernetes API server (this server runs without one)"}
	}
	return nil
}
