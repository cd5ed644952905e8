package api

import "net/http"

// Error codes: the code of every error body (Error.Code), by the status
// it comes with. A client compares Error.Code with these.
const (
	// 400 Bad Request
	CodeInvalidJSON   = "invalid_json"
	CodeInvalidBody   = "invalid_body"
	CodeInvalidField  = "invalid_field"
	CodeInvalidBundle = "invalid_bundle"
	// 401 Unauthorized
	CodeUnauthenticated    = "unauthenticated"
	CodeInvalidJoinKey     = "invalid_join_key"
	CodeJoinKeyExpired     = "join_key_expired"
	CodeJoinKeyRevoked     = "join_key_revoked"
	CodeJoinKeyExhausted   = "join_key_exhausted"
	CodeJoinKeyNotYetValid = "join_key_not_yet_valid"
	CodeInvalidNodeToken   = "invalid_node_token"
	// 403 Forbidden
	CodeForbidden           = "forbidden"
	CodeInternalRoute       = "internal_route"
	CodeOutsideVPN          = "outside_vpn"
	CodeFromTheFleet        = "from_the_fleet"
	CodeConsoleLoopbackOnly = "console_loopback_only"
	// 404 Not Found
	CodeNodeNotFound     = "node_not_found"
	CodeJoinKeyNotFound  = "join_key_not_found"
	CodeNotFound         = "not_found"
	CodeNoSuchRoute      = "no_such_route"
	CodeNoAgent          = "no_agent"
	CodeNoWorkerImage    = "no_worker_image"
	CodeThroughTheTunnel = "through_the_tunnel"
	CodeNoK3s            = "no_k3s"
	CodeNoKubelet        = "no_kubelet"
	// 405 Method Not Allowed
	CodeMethodNotAllowed = "method_not_allowed"
	// 409 Conflict
	CodeHostnameTaken          = "hostname_taken"
	CodeHostnameInCluster      = "hostname_in_cluster"
	CodeNodeTokenRequired      = "node_token_required"
	CodeNodeDisconnected       = "node_disconnected"
	CodePublicKeyTaken         = "public_key_taken"
	CodePublicKeyMismatch      = "public_key_mismatch"
	CodePodCIDRConflict        = "pod_cidr_conflict"
	CodePodCIDROutsideCluster  = "pod_cidr_outside_cluster"
	CodeAllowedIPConflict      = "allowed_ip_conflict"
	CodeVPNPoolExhausted       = "vpn_pool_exhausted"
	CodeWorkerGroupExists      = "worker_group_exists"
	CodeAlreadyExists          = "already_exists"
	CodeConflict               = "conflict"
	CodeImperativeApplications = "imperative_applications"
	CodeNoGPUWorkers           = "no_gpu_workers"
	// 413 Request Entity Too Large
	CodeBodyTooLarge = "body_too_large"
	// 415 Unsupported Media Type
	CodeUnsupportedMediaType = "unsupported_media_type"
	// 422 Unprocessable Entity
	CodeInvalidSpec          = "invalid_spec"
	CodeRejectedByKubernetes = "rejected_by_kubernetes"
	// 426 Upgrade Required
	CodeVersionMismatch = "version_mismatch"
	// 429 Too Many Requests
	CodeRateLimited  = "rate_limited"
	CodeTooManyPolls = "too_many_polls"
	// 502 Bad Gateway
	CodeKubernetesDenied        = "kubernetes_denied"
	CodeRayDashboardError       = "ray_dashboard_error"
	CodeRayDashboardUnreachable = "ray_dashboard_unreachable"
	// 503 Service Unavailable
	CodeNoKubernetes          = "no_kubernetes"
	CodeNoRayDashboard        = "no_ray_dashboard"
	CodeKubernetesUnavailable = "kubernetes_unavailable"
	CodeLedgerUnavailable     = "ledger_unavailable"
	// 504 Gateway Timeout
	CodeTimeout             = "timeout"
	CodeRayDashboardTimeout = "ray_dashboard_timeout"
	// 500 Internal Server Error
	CodeInternal = "internal"
)

// ErrorCode is an error code and the status it comes with.
type ErrorCode struct {
	Code   string
	Status int
}

// ErrorCodes are every error code with its status, by status: the one
// table the server answers by (and its OpenAPI document lists), and
// clients read codes by.
var ErrorCodes = []ErrorCode{
	{CodeInvalidJSON, http.StatusBadRequest},
	{CodeInvalidBody, http.StatusBadRequest},
	{CodeInvalidField, http.StatusBadRequest},
	{CodeInvalidBundle, http.StatusBadRequest},
	{CodeUnauthenticated, http.StatusUnauthorized},
	{CodeInvalidJoinKey, http.StatusUnauthorized},
	{CodeJoinKeyExpired, http.StatusUnauthorized},
	{CodeJoinKeyRevoked, http.StatusUnauthorized},
	{CodeJoinKeyExhausted, http.StatusUnauthorized},
	{CodeJoinKeyNotYetValid, http.StatusUnauthorized},
	{CodeInvalidNodeToken, http.StatusUnauthorized},
	{CodeForbidden, http.StatusForbidden},
	{CodeInternalRoute, http.StatusForbidden},
	{CodeOutsideVPN, http.StatusForbidden},
	{CodeFromTheFleet, http.StatusForbidden},
	{CodeConsoleLoopbackOnly, http.StatusForbidden},
	{CodeNodeNotFound, http.StatusNotFound},
	{CodeJoinKeyNotFound, http.StatusNotFound},
	{CodeNotFound, http.StatusNotFound},
	{CodeNoSuchRoute, http.StatusNotFound},
	{CodeNoAgent, http.StatusNotFound},
	{CodeNoWorkerImage, http.StatusNotFound},
	{CodeThroughTheTunnel, http.StatusNotFound},
	{CodeNoK3s, http.StatusNotFound},
	{CodeNoKubelet, http.StatusNotFound},
	{CodeMethodNotAllowed, http.StatusMethodNotAllowed},
	{CodeHostnameTaken, http.StatusConflict},
	{CodeHostnameInCluster, http.StatusConflict},
	{CodeNodeTokenRequired, http.StatusConflict},
	{CodeNodeDisconnected, http.StatusConflict},
	{CodePublicKeyTaken, http.StatusConflict},
	{CodePublicKeyMismatch, http.StatusConflict},
	{CodePodCIDRConflict, http.StatusConflict},
	{CodePodCIDROutsideCluster, http.StatusConflict},
	{CodeAllowedIPConflict, http.StatusConflict},
	{CodeVPNPoolExhausted, http.StatusConflict},
	{CodeWorkerGroupExists, http.StatusConflict},
	{CodeAlreadyExists, http.StatusConflict},
	{CodeConflict, http.StatusConflict},
	{CodeImperativeApplications, http.StatusConflict},
	{CodeNoGPUWorkers, http.StatusConflict},
	{CodeBodyTooLarge, http.StatusRequestEntityTooLarge},
	{CodeUnsupportedMediaType, http.StatusUnsupportedMediaType},
	{CodeInvalidSpec, http.StatusUnprocessableEntity},
	{CodeRejectedByKubernetes, http.StatusUnprocessableEntity},
	{CodeVersionMismatch, http.StatusUpgradeRequired},
	{CodeRateLimited, http.StatusTooManyRequests},
	{CodeTooManyPolls, http.StatusTooManyRequests},
	{CodeKubernetesDenied, http.StatusBadGateway},
	{CodeRayDashboardError, http.StatusBadGateway},
	{CodeRayDashboardUnreachable, http.StatusBadGateway},
	{CodeNoKubernetes, http.StatusServiceUnavailable},
	{CodeNoRayDashboard, http.StatusServiceUnavailable},
	{CodeKubernetesUnavailable, http.StatusServiceUnavailable},
	{CodeLedgerUnavailable, http.StatusServiceUnavailable},
	{CodeTimeout, http.StatusGatewayTimeout},
	{CodeRayDashboardTimeout, http.StatusGatewayTimeout},
	{CodeInternal, http.StatusInternalServerError},
}

// ErrorStatus is the status of each code of ErrorCodes.
var ErrorStatus = func() map[string]int {
	m := make(map[string]int, len(ErrorCodes))
	for _, c := range ErrorCodes {
		m[c.Code] = c.Status
	}
	return m
}()
