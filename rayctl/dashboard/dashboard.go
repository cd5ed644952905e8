package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Errors.
var (
	ErrNotFound           = errors.New("not found")
	ErrSubmissionIDExists = errors.New("submission_id already used")
	ErrImperativeApps     = errors.New("serve runs applications deployed imperatively; a declarative update would remove them")
	// ErrInvalidRequest is a request the client refuses before sending it.
	ErrInvalidRequest = errors.New("invalid request")
)

// APIError is a non-2xx answer of the dashboard.
type APIError struct {
	Method, Path string
	StatusCode   int
	Body         string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("ray dashboard %s %s: %d %s: %s", e.Method, e.Path, e.StatusCode, http.StatusText(e.StatusCode), strings.TrimSpace(e.Body))
}

// Is maps 404 to ErrNotFound and Ray's reused-submission-id 500 to
// ErrSubmissionIDExists.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.StatusCode == http.StatusNotFound
	case ErrSubmissionIDExists:
		return strings.Contains(e.Body, "Please use a different submission_id")
	}
	return false
}

// Options configure a Client; nil means defaults.
type Options struct {
	// HTTPClient makes the requests; default one with a 30s timeout.
	HTTPClient *http.Client
	// Token, if set, is sent as x-ray-authorization: Bearer <token>.
	Token string
}

// Client talks to one Ray dashboard.
type Client struct {
	base  *url.URL
	http  *http.Client
	token string
	// serveWrites holds one write of Serve's config at a time (a PUT, or
	// a delete's read and PUT): Ray's PUT has no precondition, so two
	// deletes that read the same config would each put back the
	// application the other removed.
	serveWrites chan struct{}
}

// New returns a Client for the dashboard at baseURL (e.g.
// http://raycluster-head-svc.ns.svc:8265).
func New(baseURL string, opts *Options) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("dashboard: invalid base URL %q: want http(s)://host:port", baseURL)
	}
	if opts == nil {
		opts = &Options{}
	}
	c := &Client{base: u, http: opts.HTTPClient, token: opts.Token, serveWrites: make(chan struct{}, 1)}
	if c.http == nil {
		c.http = &http.Client{Timeout: 30 * time.Second}
	}
	if c.token != "" {
		// The token goes to this dashboard's host alone: Go's client keeps
		// custom headers across a redirect to another host.
		client := *c.http // the caller's client keeps its own policy
		next := client.CheckRedirect
		client.CheckRedirect = func(req *http.Request, via []*http.Request) error {
			if req.URL.Host != via[0].URL.Host {
				return fmt.Errorf("dashboard: redirected to %s: the Ray token is for %s alone", req.URL.Host, via[0].URL.Host)
			}
			if next != nil {
				return next(req, via)
			}
			if len(via) >= 10 {
				return errors.New("dashboard: stopped after 10 redirects")
			}
			return nil
		}
		c.http = &client
	}
	return c, nil
}

// do sends a request and decodes a 2xx JSON answer into out (if not nil).
func (c *Client) do(ctx context.Context, method, path string, query url.Values, body, out any) error {
	u := c.base.JoinPath(path)
	// JoinPath drops a trailing slash that Ray's routes need.
	if strings.HasSuffix(path, "/") && !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	u.RawQuery = query.Encode()
	var reader io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		reader = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), reader)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("x-ray-authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("ray dashboard %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("ray dashboard %s %s: read body: %w", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &APIError{Method: method, Path: path, StatusCode: resp.StatusCode, Body: string(data)}
	}
	if out == nil || len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("ray dashboard %s %s: decode answer: %w", method, path, err)
	}
	return nil
}

// Version is GET /api/version.
type Version struct {
	Version    string `json:"version"`
	RayVersion string `json:"ray_version"`
	RayCommit  string `json:"ray_commit"`
}

// Version returns the dashboard's API and Ray versions.
func (c *Client) Version(ctx context.Context) (Version, error) {
	var v Version
	err := c.do(ctx, http.MethodGet, "/api/version", nil, nil, &v)
	return v, err
}
