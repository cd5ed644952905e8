package gridweave

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"time"

	"gridweave.dev/gridweave/api"
	"gridweave.dev/joinkeys/leaderstore"
	"gridweave.dev/rayctl/dashboard"
)

// The Ray proxy (/v1/ray, internal): Ray Serve through the cluster's
// dashboard (Config.RayDashboardURL), for the gateway that cannot reach the
// Ray head. Every call is bounded (Config.RayDashboardTimeout): an unreachable
// dashboard is a 502, a slow one a 504, never a hang. With several
// replicas the leader makes every replica's writes (ServeChannel).

// serveRoutes serve Ray Serve through the dashboard: its client, made
// once; nil when Config.RayDashboardURL is empty. channel, when set,
// takes the writes to the leader.
type serveRoutes struct {
	responder
	dashboard *dashboard.Client
	timeout   time.Duration
	channel   *ServeChannel
}

// ServeChannel hands a replica's writes of Ray Serve's config to the
// replica that leads. Serve takes its whole config at once, with no
// precondition, so removing one application is a read and a write back:
// two replicas removing one each would each put back what the other
// removed. The leader's dashboard client makes one such write at a time
// for every replica; the leader serves them (Server.ServeChannelHandler)
// on the replicas' channel.
type ServeChannel struct {
	// Leader says where the leader's channel is (its base URL), or that
	// this replica leads (Self); refresh asks for a fresh answer.
	Leader func(ctx context.Context, refresh bool) (leaderstore.Target, error)
	// Client carries the writes; with TLS it trusts only the master's
	// certificate.
	Client *http.Client
	// Credential is the replicas' (leaderstore.Credential).
	Credential string
}

// ServePathPrefix is where Server.ServeChannelHandler takes the other
// replicas' writes of Serve's config: DELETE ServePathPrefix+{app}.
const ServePathPrefix = "/serve/v1/applications/"

func newServeRoutes(a responder, cfg *Config, channel *ServeChannel) (*serveRoutes, error) {
	d := &serveRoutes{responder: a, timeout: rayTimeout(cfg), channel: channel}
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
	if d.dashboard != nil && d.channel != nil {
		return api.Deleted{Deleted: app}, d.deleteThroughLeader(r.Context(), app)
	}
	return api.Deleted{Deleted: app}, d.deleteHere(r.Context(), app)
}

// deleteHere removes app with this replica's dashboard client.
func (d *serveRoutes) deleteHere(ctx context.Context, app string) error {
	return d.call(ctx, func(ctx context.Context, c *dashboard.Client) error { return c.DeleteApplication(ctx, app) })
}

// deleteThroughLeader removes app with the leader's dashboard client:
// this replica's when it leads, else over the channel, whose answer (the
// leader's, in the contract's shape) is this one. A replica asked that
// no longer leads is asked again once the leader is looked up afresh.
func (d *serveRoutes) deleteThroughLeader(ctx context.Context, app string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*d.timeout)
	defer cancel()
	for refresh := range 2 {
		target, err := d.channel.Leader(ctx, refresh == 1)
		switch {
		case err != nil:
			return &apiError{code: api.CodeRayDashboardUnreachable, message: "no replica leads to make Serve's writes: " + err.Error()}
		case target.Self:
			return d.deleteHere(ctx, app)
		case target.URL == "":
			return &apiError{code: api.CodeRayDashboardUnreachable, message: "no replica leads to make Serve's writes"}
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodDelete, target.URL+ServePathPrefix+url.PathEscape(app), nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+d.channel.Credential)
		resp, err := d.channel.Client.Do(req)
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			return &apiError{code: api.CodeRayDashboardTimeout, message: "the replica that makes Serve's writes did not answer within " + (2 * d.timeout).String() + "; the delete may still be made"}
		case err != nil:
			return &apiError{code: api.CodeRayDashboardUnreachable, message: "the replica that makes Serve's writes cannot be reached: " + err.Error()}
		}
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusOK:
			return nil
		case resp.StatusCode == http.StatusServiceUnavailable && refresh == 0 && !json.Valid(raw):
			continue // that replica no longer leads
		}
		var body api.ErrorBody
		if json.Unmarshal(raw, &body) != nil || body.Error.Code == "" {
			return &apiError{code: api.CodeRayDashboardUnreachable, message: fmt.Sprintf("the replica that makes Serve's writes answered %s", resp.Status)}
		}
		return &apiError{code: body.Error.Code, message: body.Error.Message, field: body.Error.Field, details: body.Error.Details}
	}
	return &apiError{code: api.CodeRayDashboardUnreachable, message: "no replica leads to make Serve's writes"}
}

// ServeChannelHandler serves the other replicas' writes of Serve's config
// (ServeChannel) at ServePathPrefix, made with this server's dashboard
// client and answered as its own route answers: only while leading says
// this replica leads, and only with the replicas' credential
// (leaderstore.ForReplicas).
func (s *Server) ServeChannelHandler(credential string, leading func() bool) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("DELETE "+ServePathPrefix+"{app}", func(w http.ResponseWriter, r *http.Request) {
		app := r.PathValue("app")
		// A read and a write back: once begun it ends (within the
		// dashboard's timeout) whether or not the replica that asked
		// stays.
		if err := s.serve.deleteHere(context.WithoutCancel(r.Context()), app); err != nil {
			s.responder.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, api.Deleted{Deleted: app})
	})
	return leaderstore.ForReplicas(credential, leading, mux)
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
