package dashboard_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"

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
	if details.DeployMode != "MULTI_APP" || len(details.Applications) != 3 || details.Applications["chat"].Status != "RUNNING" {
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
	if err := c.PutApplications(ctx, map[string]any{"applications": []any{}, "bogus": 1}); !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Body, "bogus") {
		t.Fatalf("strict PUT: %v", err)
	}
	if _, err := dashboard.New("ftp://x", nil); err == nil {
		t.Error("a non-HTTP base URL was accepted")
	}
	v, err := c.Version(ctx)
	if err != nil || v.RayVersion != "2.54.0" {
		t.Fatalf("Version = %+v, %v", v, err)
	}
}

func TestJobsAPI(t *testing.T) {
	ctx := context.Background()
	d := rayctltest.NewDashboard(t, "")
	c := client(t, d, "")
	sub, err := c.SubmitJob(ctx, dashboard.SubmitRequest{Entrypoint: "python train.py", SubmissionID: "train-1",
		RuntimeEnv: map[string]any{"working_dir": "https://example.invalid/bundle.zip"}, Metadata: map[string]string{"team": "ml"}, EntrypointNumGPUs: 1})
	if err != nil || sub.SubmissionID != "train-1" || sub.JobID == "" {
		t.Fatalf("SubmitJob = %+v, %v", sub, err)
	}
	if _, err := c.SubmitJob(ctx, dashboard.SubmitRequest{Entrypoint: "python train.py", SubmissionID: "train-1"}); !errors.Is(err, dashboard.ErrSubmissionIDExists) {
		t.Errorf("reused submission id: %v", err)
	}
	var apiErr *dashboard.APIError
	if _, err := c.SubmitJob(ctx, dashboard.SubmitRequest{}); !errors.As(err, &apiErr) || apiErr.StatusCode != 400 {
		t.Errorf("no entrypoint: %v", err)
	}
	j, err := c.GetJob(ctx, "train-1")
	if err != nil || j.Status != "PENDING" || j.Metadata["team"] != "ml" || j.Terminal() {
		t.Fatalf("GetJob = %+v, %v", j, err)
	}
	if _, err := c.GetJob(ctx, "nope"); !errors.Is(err, dashboard.ErrNotFound) {
		t.Errorf("unknown job: %v", err)
	}
	if ok, err := c.DeleteJob(ctx, "train-1"); err == nil || ok {
		t.Errorf("deleting a running job: %v, %v", ok, err)
	}
	d.SetJobStatus("train-1", "RUNNING", "epoch 1 loss 0.5\n")
	if logs, err := c.JobLogs(ctx, "train-1"); err != nil || logs != "epoch 1 loss 0.5\n" {
		t.Errorf("JobLogs = %q, %v", logs, err)
	}
	if stopped, err := c.StopJob(ctx, "train-1"); err != nil || !stopped {
		t.Errorf("StopJob = %v, %v", stopped, err)
	}
	if stopped, err := c.StopJob(ctx, "train-1"); err != nil || stopped {
		t.Errorf("second StopJob = %v, %v; want false for a finished job", stopped, err)
	}
	list, err := c.ListJobs(ctx)
	if err != nil || len(list) != 1 || list[0].Status != "STOPPED" {
		t.Fatalf("ListJobs = %+v, %v", list, err)
	}
	if ok, err := c.DeleteJob(ctx, "train-1"); err != nil || !ok {
		t.Errorf("DeleteJob = %v, %v", ok, err)
	}
	if list, _ := c.ListJobs(ctx); len(list) != 0 {
		t.Errorf("jobs after delete: %+v", list)
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
