package dashboard_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"gridweave.dev/internal/raytest"
	"gridweave.dev/rayctl/dashboard"
	"gridweave.dev/rayctl/rayctltest"
)

func TestMain(m *testing.M) { os.Exit(raytest.RunMain(m)) }

// One table of cases runs against the fake dashboard (rayctltest) and
// against a real Ray dashboard (internal/raytest), so the fake answers as
// Ray does: where they differ, the real-Ray run fails.

// backend is a dashboard the cases run against.
type backend struct {
	url string
	// ran tells the backend that a job's entrypoint ran to status with
	// logs: the fake records it, real Ray has done it already.
	ran func(id, status, logs string)
	// httpPort is a free port for Serve's HTTP proxy.
	httpPort int
}

type dashboardCase struct {
	name string
	run  func(t *testing.T, b backend, c *dashboard.Client, prefix string)
}

var dashboardCases = []dashboardCase{
	{"version", func(t *testing.T, _ backend, c *dashboard.Client, _ string) {
		v, err := c.Version(context.Background())
		if err != nil || v.RayVersion != raytest.RayVersion || v.Version == "" {
			t.Fatalf("Version = %+v, %v", v, err)
		}
	}},
	{"job lifecycle", caseJobLifecycle},
	{"job errors", caseJobErrors},
	{"packages", casePackages},
	{"serve applications", caseServe},
}

func runDashboardCases(t *testing.T, b backend) {
	// Calls are bounded by two minutes, not the client's default 30 s:
	// Serve's first deploy starts its controller and proxy actors, which
	// on a loaded two-core machine takes longer; the cases are about what
	// the answers say.
	c, err := dashboard.New(b.url, &dashboard.Options{HTTPClient: &http.Client{Timeout: 2 * time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range dashboardCases {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, b, c, fmt.Sprintf("case%d-%d", i, time.Now().UnixNano()%1e6)) })
	}
}

func TestDashboardCasesOnTheFake(t *testing.T) {
	d := rayctltest.NewDashboard(t, "")
	runDashboardCases(t, backend{url: d.URL, ran: func(id, status, logs string) { d.SetJobStatus(id, status, logs) }, httpPort: 8000})
}

func TestDashboardCasesOnRealRay(t *testing.T) {
	head := raytest.Shared(t)
	runDashboardCases(t, backend{url: head.DashboardURL, ran: func(string, string, string) {}, httpPort: freePort(t)})
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// waitJob polls a job until its status is want.
func waitJob(t *testing.T, c *dashboard.Client, id, want string) dashboard.JobDetails {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		j, err := c.GetJob(ctx, id)
		if err != nil {
			t.Fatalf("GetJob %s: %v", id, err)
		}
		if j.Status == want {
			return j
		}
		if j.Terminal() {
			logs, _ := c.JobLogs(ctx, id)
			t.Fatalf("job %s is %s (%v), want %s; logs:\n%s", id, j.Status, deref(j.Message), want, logs)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("job %s still %s, want %s", id, j.Status, want)
		case <-time.After(300 * time.Millisecond):
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// caseJobLifecycle: a job that prints and then waits is submitted, runs,
// shows its log, is stopped, listed, deleted.
func caseJobLifecycle(t *testing.T, b backend, c *dashboard.Client, prefix string) {
	ctx := context.Background()
	id := prefix + "-train"
	sub, err := c.SubmitJob(ctx, dashboard.SubmitRequest{
		Entrypoint:   `python -c "import time; print('epoch 1 loss 0.5', flush=True); time.sleep(600)"`,
		SubmissionID: id, Metadata: map[string]string{"team": "ml"}, EntrypointNumCPUs: 0.1,
	})
	if err != nil || sub.SubmissionID != id {
		t.Fatalf("SubmitJob = %+v, %v", sub, err)
	}
	j, err := c.GetJob(ctx, id)
	if err != nil || j.Metadata["team"] != "ml" || deref(j.SubmissionID) != id || j.Type != "SUBMISSION" {
		t.Fatalf("GetJob = %+v, %v", j, err)
	}
	b.ran(id, "RUNNING", "epoch 1 loss 0.5\n")
	waitJob(t, c, id, "RUNNING")
	deadline := time.Now().Add(time.Minute)
	for {
		logs, err := c.JobLogs(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(logs, "epoch 1 loss 0.5\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("JobLogs = %q", logs)
		}
		time.Sleep(300 * time.Millisecond)
	}
	var apiErr *dashboard.APIError
	if ok, err := c.DeleteJob(ctx, id); !errors.As(err, &apiErr) || apiErr.StatusCode != 500 || ok {
		t.Errorf("deleting a running job: %v, %v; want Ray's 500", ok, err)
	}
	if stopped, err := c.StopJob(ctx, id); err != nil || !stopped {
		t.Fatalf("StopJob = %v, %v", stopped, err)
	}
	waitJob(t, c, id, "STOPPED")
	// Ray answers a stop by whether the job's supervisor actor lives, and
	// marks the job STOPPED a moment before the actor is gone: a stop in
	// between still answers true.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		stopped, err := c.StopJob(ctx, id)
		if err != nil {
			t.Fatalf("second StopJob: %v", err)
		}
		if !stopped {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("StopJob of a STOPPED job still answers true 30 s later; want false for a finished job")
			break
		}
	}
	list, err := c.ListJobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, j := range list {
		if deref(j.SubmissionID) == id {
			found = j.Status == "STOPPED"
		}
	}
	if !found {
		t.Fatalf("ListJobs does not list %s as STOPPED: %+v", id, list)
	}
	if ok, err := c.DeleteJob(ctx, id); err != nil || !ok {
		t.Fatalf("DeleteJob = %v, %v", ok, err)
	}
	if _, err := c.GetJob(ctx, id); !errors.Is(err, dashboard.ErrNotFound) {
		t.Errorf("a deleted job: %v", err)
	}
}

// caseJobErrors: a reused submission id, a missing entrypoint and an
// unknown job are typed errors.
func caseJobErrors(t *testing.T, b backend, c *dashboard.Client, prefix string) {
	ctx := context.Background()
	id := prefix + "-short"
	if _, err := c.SubmitJob(ctx, dashboard.SubmitRequest{Entrypoint: `python -c "print('done')"`, SubmissionID: id, EntrypointNumCPUs: 0.1}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SubmitJob(ctx, dashboard.SubmitRequest{Entrypoint: "python x.py", SubmissionID: id}); !errors.Is(err, dashboard.ErrSubmissionIDExists) {
		t.Errorf("reused submission id: %v", err)
	}
	// Ray runs an empty entrypoint; the client refuses it before sending.
	if _, err := c.SubmitJob(ctx, dashboard.SubmitRequest{SubmissionID: prefix + "-empty"}); !errors.Is(err, dashboard.ErrInvalidRequest) || !strings.Contains(err.Error(), "entrypoint is required") {
		t.Errorf("no entrypoint: %v", err)
	}
	if _, err := c.GetJob(ctx, prefix+"-empty"); !errors.Is(err, dashboard.ErrNotFound) {
		t.Errorf("a job without entrypoint reached the dashboard: %v", err)
	}
	if _, err := c.GetJob(ctx, prefix+"-nope"); !errors.Is(err, dashboard.ErrNotFound) {
		t.Errorf("unknown job: %v", err)
	}
	if _, err := c.JobLogs(ctx, prefix+"-nope"); !errors.Is(err, dashboard.ErrNotFound) {
		t.Errorf("logs of an unknown job: %v", err)
	}
	b.ran(id, "SUCCEEDED", "done\n")
	waitJob(t, c, id, "SUCCEEDED")
	if logs, err := c.JobLogs(ctx, id); err != nil || !strings.Contains(logs, "done\n") {
		t.Errorf("JobLogs = %q, %v", logs, err)
	}
	if ok, err := c.DeleteJob(ctx, id); err != nil || !ok {
		t.Errorf("DeleteJob = %v, %v", ok, err)
	}
}

// packageZip is raytest.Package, failing the test on an error.
func packageZip(t *testing.T, files map[string]string) (string, []byte) {
	uri, data, err := raytest.Package(files)
	if err != nil {
		t.Fatal(err)
	}
	return uri, data
}

func casePackages(t *testing.T, _ backend, c *dashboard.Client, prefix string) {
	ctx := context.Background()
	uri, data := packageZip(t, map[string]string{"hello.py": "print('" + prefix + "')\n"})
	if ok, err := c.PackageExists(ctx, uri); err != nil || ok {
		t.Fatalf("a new package exists: %v %v", ok, err)
	}
	if err := c.UploadPackage(ctx, uri, data); err != nil {
		t.Fatal(err)
	}
	if ok, err := c.PackageExists(ctx, uri); err != nil || !ok {
		t.Fatalf("the uploaded package: %v %v", ok, err)
	}
}

// caseServe: two applications PUT declaratively, their statuses read,
// one removed by name while the other keeps its config, a PUT Ray
// refuses changing nothing.
func caseServe(t *testing.T, b backend, c *dashboard.Client, prefix string) {
	ctx := context.Background()
	uri, data := packageZip(t, map[string]string{"model.py": raytest.ServeModule})
	if err := c.UploadPackage(ctx, uri, data); err != nil {
		t.Fatal(err)
	}
	app := func(name string) map[string]any {
		return map[string]any{"name": name, "route_prefix": "/" + name, "import_path": "model:app",
			"runtime_env": map[string]any{"working_dir": uri}}
	}
	chat, embed := prefix+"-chat", prefix+"-embed"
	config := map[string]any{
		"http_options": map[string]any{"host": "127.0.0.1", "port": b.httpPort},
		"applications": []any{app(chat), app(embed)},
	}
	if err := c.PutApplications(ctx, config); err != nil {
		t.Fatal(err)
	}
	details := waitApps(t, c, map[string]string{chat: "RUNNING", embed: "RUNNING"})
	if !strings.Contains(string(details.Raw), "controller_info") {
		t.Errorf("Raw does not keep the whole answer: %s", details.Raw)
	}
	got := details.Applications[chat]
	if got.Source != "declarative" || got.DeployedAppConfig["import_path"] != "model:app" || deref(got.RoutePrefix) != "/"+chat {
		t.Errorf("application %+v", got)
	}
	dep, ok := got.Deployments["Model"]
	if !ok || dep.Status != "HEALTHY" || len(dep.Replicas) != 1 || dep.Replicas[0].State != "RUNNING" || dep.Replicas[0].NodeIP == "" {
		t.Errorf("deployment %+v", dep)
	}

	if err := c.DeleteApplication(ctx, embed); err != nil {
		t.Fatal(err)
	}
	details = waitApps(t, c, map[string]string{chat: "RUNNING", embed: ""})
	if details.Applications[chat].DeployedAppConfig["import_path"] != "model:app" {
		t.Errorf("the kept application lost its config: %+v", details.Applications[chat].DeployedAppConfig)
	}
	if err := c.DeleteApplication(ctx, embed); !errors.Is(err, dashboard.ErrNotFound) {
		t.Errorf("deleting a missing application: %v", err)
	}
	var apiErr *dashboard.APIError
	// Ray validates the applications (and ignores top-level fields it
	// does not know): one without import_path is refused, nothing changes.
	if err := c.PutApplications(ctx, map[string]any{"applications": []any{map[string]any{"name": "broken", "route_prefix": "/broken"}}}); !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Body, "import_path") {
		t.Errorf("a PUT without import_path: %v", err)
	}
	waitApps(t, c, map[string]string{chat: "RUNNING", "broken": ""})
	if err := c.DeleteApplication(ctx, chat); err != nil {
		t.Fatal(err)
	}
	waitApps(t, c, map[string]string{chat: ""})
}

// waitApps polls Serve until each named application has the status given
// ("" meaning gone).
func waitApps(t *testing.T, c *dashboard.Client, want map[string]string) *dashboard.ServeDetails {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for {
		d, err := c.ServeApplications(ctx)
		if err != nil {
			t.Fatal(err)
		}
		done := true
		for name, status := range want {
			if app, ok := d.Applications[name]; ok != (status != "") || (ok && app.Status != status) {
				done = false
				if app.Status == "DEPLOY_FAILED" {
					t.Fatalf("application %s failed: %s", name, app.Message)
				}
			}
		}
		if done {
			return d
		}
		select {
		case <-ctx.Done():
			t.Fatalf("Serve applications did not reach %v: %s", want, d.Raw)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
