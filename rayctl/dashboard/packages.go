package dashboard

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Packages are the runtime-env files a job's working_dir and py_modules
// name by URI (e.g. gcs://_ray_pkg_<hash>.zip): content-addressed, so a
// package already on the cluster is never sent again.

// packagePath is the Jobs API's path of a package URI.
func packagePath(uri string) (string, error) {
	protocol, name, ok := strings.Cut(uri, "://")
	if !ok || protocol == "" || name == "" || strings.Contains(name, "/") {
		return "", fmt.Errorf("dashboard: package URI %q: want protocol://name, e.g. gcs://_ray_pkg_0123abcd.zip", uri)
	}
	return "/api/packages/" + url.PathEscape(protocol) + "/" + url.PathEscape(name), nil
}

// PackageExists says whether the cluster already has the package.
func (c *Client) PackageExists(ctx context.Context, uri string) (bool, error) {
	path, err := packagePath(uri)
	if err != nil {
		return false, err
	}
	err = c.do(ctx, http.MethodGet, path, nil, nil, nil)
	var apiErr *APIError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusNotFound:
		return false, nil
	}
	return false, err
}

// UploadPackage sends a package (a zip) under its URI.
func (c *Client) UploadPackage(ctx context.Context, uri string, zip []byte) error {
	return c.UploadPackageFrom(ctx, uri, bytes.NewReader(zip))
}

// UploadPackageFrom sends a package read from body, streamed (the zip
// need not be in memory); an error reading body ends the upload with it.
func (c *Client) UploadPackageFrom(ctx context.Context, uri string, body io.Reader) error {
	path, err := packagePath(uri)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, c.base.JoinPath(path).String(), body)
	if err != nil {
		return err
	}
	if c.token != "" {
		req.Header.Set("x-ray-authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("ray dashboard PUT %s: %w", path, err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &APIError{Method: http.MethodPut, Path: path, StatusCode: resp.StatusCode, Body: string(answer)}
	}
	return nil
}
