package api

// Health answers GET /healthz.
type Health struct {
	Status  string `json:"status"`
	Version string `json:"version"`
}

// Readiness answers GET /readyz: Status "ready", or "unavailable" with
// Error naming the backends that do not answer.
type Readiness struct {
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
}
