package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
)

// ServeDetails is GET /api/serve/applications/ (ServeInstanceDetails).
type ServeDetails struct {
	ProxyLocation  string                 `json:"proxy_location"`
	HTTPOptions    map[string]any         `json:"http_options"`
	GRPCOptions    map[string]any         `json:"grpc_options"`
	TargetCapacity *float64               `json:"target_capacity"`
	Applications   map[string]Application `json:"applications"`
	// Raw is the whole answer, for fields this type does not name.
	Raw json.RawMessage `json:"-"`
}

// Application is one Serve application's status.
type Application struct {
	Name              string                `json:"name"`
	RoutePrefix       *string               `json:"route_prefix"`
	DocsPath          *string               `json:"docs_path"`
	Status            string                `json:"status"` // NOT_STARTED, DEPLOYING, DEPLOY_FAILED, RUNNING, UNHEALTHY, DELETING
	Message           string                `json:"message"`
	LastDeployedTimeS float64               `json:"last_deployed_time_s"`
	Source            string                `json:"source"` // declarative or imperative
	DeployedAppConfig map[string]any        `json:"deployed_app_config"`
	Deployments       map[string]Deployment `json:"deployments"`
}

// Deployment is one deployment of an application.
type Deployment struct {
	Name              string    `json:"name"`
	Status            string    `json:"status"` // UPDATING, HEALTHY, UNHEALTHY, DEPLOY_FAILED, UPSCALING, DOWNSCALING
	StatusTrigger     string    `json:"status_trigger"`
	Message           string    `json:"message"`
	TargetNumReplicas int       `json:"target_num_replicas"`
	Replicas          []Replica `json:"replicas"`
}

// Replica is one replica of a deployment.
type Replica struct {
	ReplicaID  string  `json:"replica_id"`
	State      string  `json:"state"`
	NodeIP     string  `json:"node_ip"`
	StartTimeS float64 `json:"start_time_s"`
}

// ServeApplications returns the Serve instance's details and application
// statuses (declarative view).
func (c *Client) ServeApplications(ctx context.Context) (*ServeDetails, error) {
	var raw json.RawMessage
	if err := c.do(ctx, http.MethodGet, "/api/serve/applications/", url.Values{"api_type": {"declarative"}}, nil, &raw); err != nil {
		return nil, err
	}
	d := &ServeDetails{Raw: raw}
	if err := json.Unmarshal(raw, d); err != nil {
		return nil, fmt.Errorf("ray dashboard: decode Serve details: %w", err)
	}
	return d, nil
}

// PutApplications sends a declarative Serve config (ServeDeploySchema): Ray
// deploys what it lists and removes every application it does not.
func (c *Client) PutApplications(ctx context.Context, config any) error {
	unlock, err := c.lockServe(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	return c.putApplications(ctx, config)
}

func (c *Client) putApplications(ctx context.Context, config any) error {
	return c.do(ctx, http.MethodPut, "/api/serve/applications/", nil, config, nil)
}

// lockServe waits for the Client's other writes of Serve's config, or
// ctx's end.
func (c *Client) lockServe(ctx context.Context) (unlock func(), err error) {
	select {
	case c.serveWrites <- struct{}{}:
		return func() { <-c.serveWrites }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// DeleteApplication removes one Serve application by name: it reads the
// declarative config and PUTs it back without that application. Serve and
// the other applications keep running. ErrNotFound if there is no such
// application; ErrImperativeApps if Serve runs applications this update
// would silently remove (deployed imperatively, or without a
// deployed_app_config to put back). The Client's writes of Serve's config
// wait for each other; another client's may still land between the read
// and the PUT (Ray's PUT takes no precondition).
func (c *Client) DeleteApplication(ctx context.Context, name string) error {
	unlock, err := c.lockServe(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	d, err := c.ServeApplications(ctx)
	if err != nil {
		return err
	}
	if _, ok := d.Applications[name]; !ok {
		return fmt.Errorf("%w: Serve application %q", ErrNotFound, name)
	}
	config := map[string]any{"applications": []any{}}
	if d.ProxyLocation != "" {
		config["proxy_location"] = d.ProxyLocation
	}
	if d.HTTPOptions != nil {
		config["http_options"] = d.HTTPOptions
	}
	if d.GRPCOptions != nil {
		config["grpc_options"] = d.GRPCOptions
	}
	if d.TargetCapacity != nil {
		config["target_capacity"] = *d.TargetCapacity
	}
	names := make([]string, 0, len(d.Applications))
	for n := range d.Applications {
		names = append(names, n)
	}
	sort.Strings(names)
	var apps []any
	for _, n := range names {
		app := d.Applications[n]
		if app.Source == "imperative" {
			return fmt.Errorf("%w (application %q)", ErrImperativeApps, n)
		}
		if n == name {
			continue
		}
		if app.DeployedAppConfig == nil {
			return fmt.Errorf("%w (application %q has no deployed_app_config to put back)", ErrImperativeApps, n)
		}
		apps = append(apps, app.DeployedAppConfig)
	}
	if apps != nil {
		config["applications"] = apps
	}
	return c.putApplications(ctx, config)
}
