package gridweave

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"gridweave.dev/rayctl/dashboard"
)

// The Ray proxy (/v1/ray, internal): Ray Serve through the cluster's
// dashboard (RAY_DASHBOARD_URL), for the gateway that cannot reach the
// Ray head. Every call is bounded (RAY_DASHBOARD_TIMEOUT): an unreachable
// dashboard is a 502, a slow one a 504, never a hang.

func (s *Server) rayTimeout() time.Duration {
	if s.cfg.RayDashboardTimeout > 0 {
		return s.cfg.RayDashboardTimeout
	}
	return 15 * time.Second
}

func (s *Server) dashboardClient() (*dashboard.Client, error) {
	if s.cfg.RayDashboardURL == "" {
		return nil, &apiError{status: http.StatusServiceUnavailable, code: "no_ray_dashboard", message: "the Ray proxy is off: RAY_DASHBOARD_URL is not set"}
	}
	return dashboard.New(s.cfg.RayDashboardURL, &dashboard.Options{HTTPClient: &http.Client{Timeout: s.rayTimeout()}})
}

// dashboardError maps the dashboard's failures onto the contract.
func (s *Server) dashboardError(err error) error {
	var apiErr *dashboard.APIError
	var netErr net.Error
	switch {
	case errors.Is(err, dashboard.ErrNotFound):
		return &apiError{status: http.StatusNotFound, code: "not_found", message: err.Error()}
	case errors.Is(err, dashboard.ErrImperativeApps):
		return &apiError{status: http.StatusConflict, code: "imperative_applications", message: err.Error() + "; delete them with serve.delete, or deploy everything declaratively first"}
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout()):
		return &apiError{status: http.StatusGatewayTimeout, code: "ray_dashboard_timeout", message: "the Ray dashboard did not answer within " + s.rayTimeout().String()}
	case errors.As(err, &apiErr):
		return &apiError{status: http.StatusBadGateway, code: "ray_dashboard_error", message: err.Error()}
	}
	return &apiError{status: http.StatusBadGateway, code: "ray_dashboard_unreachable", message: "the Ray dashboard cannot be reached: " + err.Error()}
}

// serveStatus is one Serve application as the gateway reads it.
type serveStatus struct {
	Name        string            `json:"name"`
	Status      string            `json:"status"`
	Message     string            `json:"message,omitempty"`
	RoutePrefix *string           `json:"route_prefix"`
	Deployments map[string]string `json:"deployments"`
}

func (s *Server) handleServeStatuses(w http.ResponseWriter, r *http.Request) {
	d, err := s.dashboardClient()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.rayTimeout())
	defer cancel()
	details, err := d.ServeApplications(ctx)
	if err != nil {
		s.writeError(w, r, s.dashboardError(err))
		return
	}
	apps := []serveStatus{}
	for name, a := range details.Applications {
		st := serveStatus{Name: name, Status: a.Status, Message: a.Message, RoutePrefix: a.RoutePrefix, Deployments: map[string]string{}}
		for dn, dep := range a.Deployments {
			st.Deployments[dn] = dep.Status
		}
		apps = append(apps, st)
	}
	writeJSON(w, http.StatusOK, map[string]any{"applications": apps})
}

func (s *Server) handleDeleteServeApplication(w http.ResponseWriter, r *http.Request) {
	d, err := s.dashboardClient()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.rayTimeout())
	defer cancel()
	if err := d.DeleteApplication(ctx, r.PathValue("app")); err != nil {
		s.writeError(w, r, s.dashboardError(err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"deleted": r.PathValue("app")})
}
