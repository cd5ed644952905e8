package gridweave

import (
	"context"
	"net/http"
	"slices"
	"time"

	"gridweave.dev/gridweave/api"
	"gridweave.dev/rayctl/dashboard"
)

// The Ray proxy (/v1/ray, internal): Ray Serve through the cluster's
// dashboard (Config.RayDashboardURL), for the gateway that cannot reach the
// Ray head. Every call is bounded (Config.RayDashboardTimeout): an unreachable
// dashboard is a 502, a slow one a 504, never a hang.

// serveRoutes serve Ray Serve through the dashboard: its client, made
// once; nil when Config.RayDashboardURL is empty.
type serveRoutes struct {
	responder
	dashboard *dashboard.Client
	timeout   time.Duration
}

func newServeRoutes(a responder, cfg *Config) (*serveRoutes, error) {
	d := &serveRoutes{responder: a, timeout: rayTimeout(cfg)}
	if cfg.RayDashboardURL == "" {
		return d, nil
	}
	var err error
	d.dashboard, err = dashboard.New(cfg.RayDashboardURL, &dashboard.Options{HTTPClient: &http.Client{Timeout: d.timeout}})
	if err != nil {
		return nil, &SettingError{Setting: "RayDashboardURL", Err: err}
	}
	return d, nil
}

// rayTimeout bounds each call to the dashboard.
func rayTimeout(cfg *Config) time.Duration {
	if cfg.RayDashboardTimeout > 0 {
		return cfg.RayDashboardTimeout
	}
	return 15 * time.Second
}

// call runs f with the dashboard's client, bounded by the timeout; its
// failures map onto the contract.
func (d *serveRoutes) call(ctx context.Context, f func(context.Context, *dashboard.Client) error) error {
	if d.dashboard == nil {
		return &apiError{code: api.CodeNoRayDashboard, message: "the Ray proxy is off: this server was given no Ray dashboard URL"}
	}
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	if err := f(ctx, d.dashboard); err != nil {
		return &dashboardFailure{err: err, timeout: d.timeout}
	}
	return nil
}

func (d *serveRoutes) statuses(r *http.Request, _ noBody) (api.ServeStatuses, error) {
	var details *dashboard.ServeDetails
	err := d.call(r.Context(), func(ctx context.Context, c *dashboard.Client) (err error) {
		details, err = c.ServeApplications(ctx)
		return err
	})
	if err != nil {
		return api.ServeStatuses{}, err
	}
	apps := []api.ServeApplication{}
	for name, a := range details.Applications {
		st := api.ServeApplication{Name: name, Status: a.Status, Message: a.Message, RoutePrefix: a.RoutePrefix, Deployments: map[string]string{}}
		for dn, dep := range a.Deployments {
			st.Deployments[dn] = dep.Status
		}
		apps = append(apps, st)
	}
	return api.ServeStatuses{Applications: apps}, nil
}

func (d *serveRoutes) deleteApplication(r *http.Request, _ noBody) (api.Deleted, error) {
	app := r.PathValue("app")
	err := d.call(r.Context(), func(ctx context.Context, c *dashboard.Client) error { return c.DeleteApplication(ctx, app) })
	return api.Deleted{Deleted: app}, err
}

// routes are the serveRoutes routes.
func (d *serveRoutes) routes() []route {
	return []route{
		jsonRoute(d.responder, route{pattern: "GET /v1/ray/serve/statuses", auth: authInternal, on: onPublic | onInternal,
			doc: operation{id: "serveStatuses", tag: "ray", summary: "Ray Serve applications and their deployments' statuses",
				codes: slices.Concat(dashboardCodes, []string{api.CodeNoRayDashboard})}}, http.StatusOK, d.statuses),
		jsonRoute(d.responder, route{pattern: "DELETE /v1/ray/serve/applications/{app}", auth: authInternal, on: onPublic | onInternal,
			doc: operation{id: "deleteServeApplication", tag: "ray", summary: "Remove one Serve application, keeping the others",
				description: "Ray has no per-application DELETE: the declarative config is read and PUT back without this application. Refused (409) when Serve runs applications deployed imperatively, which the PUT would remove.",
				codes:       slices.Concat(dashboardCodes, []string{api.CodeNoRayDashboard})}}, http.StatusOK, d.deleteApplication),
	}
}
