package gridweave

import (
	"context"
	"net/http"
	"time"

	"gridweave.dev/gridweave/api"
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
		return nil, &apiError{code: api.CodeNoRayDashboard, message: "the Ray proxy is off: RAY_DASHBOARD_URL is not set"}
	}
	return dashboard.New(s.cfg.RayDashboardURL, &dashboard.Options{HTTPClient: &http.Client{Timeout: s.rayTimeout()}})
}

// dashboardError maps the dashboard's failures onto the contract.
func (s *Server) dashboardError(err error) error {
	return &dashboardFailure{err: err, timeout: s.rayTimeout()}
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
	apps := []api.ServeApplication{}
	for name, a := range details.Applications {
		st := api.ServeApplication{Name: name, Status: a.Status, Message: a.Message, RoutePrefix: a.RoutePrefix, Deployments: map[string]string{}}
		for dn, dep := range a.Deployments {
			st.Deployments[dn] = dep.Status
		}
		apps = append(apps, st)
	}
	writeJSON(w, http.StatusOK, api.ServeStatuses{Applications: apps})
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
	writeJSON(w, http.StatusOK, api.Deleted{Deleted: r.PathValue("app")})
}
