package dashboard_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gridweave.dev/rayctl/dashboard"
	"gridweave.dev/rayctl/rayctltest"
)

func client(t *testing.T, d *rayctltest.Dashboard, token string) *dashboard.Client {
	t.Helper()
	c, err := dashboard.New(d.URL, &dashboard.Options{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestServeStatusesAndDeleteOneApplication(t *testing.T) {
	ctx := context.Background()
	d := rayctltest.NewDashboard(t, "s3cret")
	d.DeployApp("chat", "/chat", "chat.app:deployment")
	d.DeployApp("embed", "/embed", "embed.app:deployment")
	d.DeployApp("rerank", "/rerank", "rerank.app:deployment")
	c := client(t, d, "s3cret")

	details, err := c.ServeApplications(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(details.Applications) != 3 || details.Applications["chat"].Status != "RUNNING" {
		t.Fatalf("details %+v", details)
	}
	if dep := details.Applications["chat"].Deployments["Model"]; dep.Status != "HEALTHY" || len(dep.Replicas) != 1 || dep.Replicas[0].State != "RUNNING" {
		t.Fatalf("deployment %+v", dep)
	}
	if !strings.Contains(string(details.Raw), "controller_info") {
		t.Error("Raw does not keep the whole answer")
	}

	if err := c.DeleteApplication(ctx, "embed"); err != nil {
		t.Fatal(err)
	}
	if got := d.Apps(); !slices.Equal(got, []string{"chat", "rerank"}) {
		t.Fatalf("apps after deleting embed: %v", got)
	}
	// The others were kept with their config intact.
	details, _ = c.ServeApplications(ctx)
	if details.Applications["rerank"].DeployedAppConfig["import_path"] != "rerank.app:deployment" {
		t.Errorf("rerank config %+v", details.Applications["rerank"].DeployedAppConfig)
	}
	if err := c.DeleteApplication(ctx, "embed"); !errors.Is(err, dashboard.ErrNotFound) {
		t.Errorf("deleting a missing app: %v", err)
	}
	// The last ones can go too; Serve stays up with no applications.
	_ = c.DeleteApplication(ctx, "chat")
	if err := c.DeleteApplication(ctx, "rerank"); err != nil {
		t.Fatal(err)
	}
	if got := d.Apps(); len(got) != 0 {
		t.Fatalf("apps left %v", got)
	}
}

func TestDeleteRefusesToDropImperativeApps(t *testing.T) {
	d := rayctltest.NewDashboard(t, "")
	d.DeployApp("a", "/a", "a:app")
	d.DeployApp("b", "/b", "b:app")
	d.MarkImperative("b")
	c := client(t, d, "")
	if err := c.DeleteApplication(context.Background(), "a"); !errors.Is(err, dashboard.ErrImperativeApps) {
		t.Fatalf("DeleteApplication with an imperative app: %v", err)
	}
	if d.Puts() != 0 {
		t.Fatal("a PUT was sent")
	}
}

func TestErrorsAreTyped(t *testing.T) {
	ctx := context.Background()
	d := rayctltest.NewDashboard(t, "s3cret")
	_, err := client(t, d, "wrong").ServeApplications(ctx)
	var apiErr *dashboard.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized || !strings.Contains(err.Error(), "authentication") {
		t.Fatalf("bad token: %v", err)
	}
	c := client(t, d, "s3cret")
	if _, err := dashboard.New("ftp://x", nil); err == nil {
		t.Error("a non-HTTP base URL was accepted")
	}
	v, err := c.Version(ctx)
	if err != nil || v.RayVersion != "2.54.0" {
		t.Fatalf("Version = %+v, %v", v, err)
	}
}

// TestTokenNeverPrints: options and clients carrying a dashboard token
// format and log themselves without it.
func TestTokenNeverPrints(t *testing.T) {
	const token = "ray-dashboard-secret-token-0123456789"
	opts := &dashboard.Options{Token: token}
	c, err := dashboard.New("http://user:pw@127.0.0.1:8265", opts)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	fmt.Fprintf(&out, "%v %+v %#v %v %+v %#v", opts, opts, opts, c, c, c)
	slog.New(slog.NewJSONHandler(&out, nil)).Info("x", "opts", opts, "client", c)
	slog.New(slog.NewTextHandler(&out, nil)).Info("x", "opts", *opts, "client", c)
	if strings.Contains(out.String(), token) || strings.Contains(out.String(), ":pw@") {
		t.Errorf("a secret leaked: %s", out.String())
	}
	if !strings.Contains(out.String(), "127.0.0.1:8265") {
		t.Errorf("the dashboard address should print: %s", out.String())
	}
}

func TestPackagesAreUploadedOnce(t *testing.T) {
	d := rayctltest.NewDashboard(t, "tok")
	c := client(t, d, "tok")
	ctx := context.Background()
	const uri = "gcs://_ray_pkg_0123456789abcdef.zip"
	if ok, err := c.PackageExists(ctx, uri); err != nil || ok {
		t.Fatalf("a new package exists: %v %v", ok, err)
	}
	if err := c.UploadPackage(ctx, uri, []byte("PK\x03\x04 a zip")); err != nil {
		t.Fatal(err)
	}
	if ok, err := c.PackageExists(ctx, uri); err != nil || !ok {
		t.Fatalf("the uploaded package: %v %v", ok, err)
	}
	if got := string(d.Packages()[uri]); got != "PK\x03\x04 a zip" {
		t.Errorf("the dashboard holds %q", got)
	}
	for _, bad := range []string{"_ray_pkg_x.zip", "gcs://", "gcs://a/b.zip"} {
		if _, err := c.PackageExists(ctx, bad); err == nil || !strings.Contains(err.Error(), "protocol://name") {
			t.Errorf("URI %q: %v", bad, err)
		}
	}
}

// TestConcurrentDeletesKeepEachOther: two deletes of different
// applications through one Client, whose reads of Serve's config would
// both come before either PUT if nothing held them apart (a dashboard
// that answers the reads together, once both arrived or after a while):
// each PUT would put back the application the other removed. Both stay
// deleted.
func TestConcurrentDeletesKeepEachOther(t *testing.T) {
	d := rayctltest.NewDashboard(t, "")
	for _, app := range []string{"a", "b", "c"} {
		d.DeployApp(app, "/"+app, app+":app")
	}
	var arrived sync.WaitGroup
	arrived.Add(2)
	both := make(chan struct{})
	go func() { arrived.Wait(); close(both) }()
	reads := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/api/serve/applications") {
			arrived.Done()
			select {
			case <-both:
			case <-time.After(300 * time.Millisecond):
			}
		}
		d.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(reads.Close)
	c, err := dashboard.New(reads.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, app := range []string{"a", "b"} {
		wg.Go(func() {
			if err := c.DeleteApplication(context.Background(), app); err != nil {
				t.Errorf("delete %s: %v", app, err)
			}
		})
	}
	wg.Wait()
	if got := d.Apps(); !slices.Equal(got, []string{"c"}) {
		t.Errorf("after deleting a and b at once Serve runs %v, want [c]", got)
	}
}
