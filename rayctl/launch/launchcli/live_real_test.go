package launchcli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"gridweave.dev/internal/netnstest"
	"gridweave.dev/internal/raytest"
	"gridweave.dev/internal/testcluster"
	"gridweave.dev/rayctl/dashboard"
	"gridweave.dev/rayctl/launch"
	"gridweave.dev/rayctl/rayctltest"
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// The live commands are tested as a user runs them: the built binary,
// pointed at the test control plane's kubeconfig.

var launcherBinary struct {
	once sync.Once
	path string
	err  error
}

func builtLauncher(t testing.TB) string {
	t.Helper()
	launcherBinary.once.Do(func() {
		dir, err := os.MkdirTemp("", "launcher-bin-")
		if err != nil {
			launcherBinary.err = err
			return
		}
		launcherBinary.path = filepath.Join(dir, "launcher")
		if out, err := exec.Command("go", "build", "-o", launcherBinary.path, "../../../examples/launcher").CombinedOutput(); err != nil {
			launcherBinary.err = fmt.Errorf("go build: %v: %s", err, out)
		}
	})
	if launcherBinary.err != nil {
		t.Fatal(launcherBinary.err)
	}
	return launcherBinary.path
}

// cli runs the built launcher against the cluster; it returns the exit
// code, stdout and stderr.
func cli(t *testing.T, tc *testcluster.Cluster, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, builtLauncher(t), append([]string{"--kubeconfig", tc.KubeconfigPath}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, stdout.String(), stderr.String()
}

// liveNamespace makes a namespace with the pull secret the example infra
// specs name, and the GPU nodes and PriorityClass they need.
func liveNamespace(t *testing.T, tc *testcluster.Cluster, prefix string) string {
	t.Helper()
	ctx := context.Background()
	run := runs.Add(1)
	ns := fmt.Sprintf("%s-%d", prefix, run)
	if err := tc.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ghcr-pull", Namespace: ns}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)}}
	if _, err := tc.Kube.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	big := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("96"), corev1.ResourceMemory: resource.MustParse("1Ti"),
		corev1.ResourceEphemeralStorage: resource.MustParse("2Ti"), "nvidia.com/gpu": resource.MustParse("8"),
	}
	for i := range 2 {
		if _, err := tc.AddNode(ctx, fmt.Sprintf("%s-gpu-%d", ns, i), big, nil, fmt.Sprintf("198.18.%d.0/24", 120+2*int(run)+i)); err != nil {
			t.Fatal(err)
		}
	}
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "training-high"}, Value: 1000}
	if _, err := tc.Kube.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return ns
}

// TestRunBringupStatusLogsDown: `run` of the bringup example applies
// everything but the namespace's quota and limits and waits until the
// RayCluster is ready and the sandbox available; `status` shows every
// fleet's pods; `logs` prefixes each line with its pod; `cluster down`
// removes everything it applied, and again is a no-op.
func TestRunBringupStatusLogsDown(t *testing.T) {
	tc := testcluster.Shared(t)
	ctx := context.Background()
	ns := liveNamespace(t, tc, "live-up")
	recipe, infra := filepath.Join(specs, "grpo_swe.recipe.yaml"), filepath.Join(specs, "grpo_swe_sglang.infra.yaml")

	code, out, errOut := cli(t, tc, "run", recipe, infra, "-n", ns, "--timeout", "3m")
	if code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"applied RayCluster " + ns + "/grpo-swe", "applied NetworkPolicy", "applied PodDisruptionBudget",
		"not applied: ResourceQuota", "not applied: LimitRange", "RayCluster " + ns + "/grpo-swe is running"} {
		if !strings.Contains(out, want) {
			t.Errorf("run's output lacks %q:\n%s", want, out)
		}
	}
	if q, _ := tc.Kube.CoreV1().ResourceQuotas(ns).List(ctx, metav1.ListOptions{}); len(q.Items) != 0 {
		t.Errorf("the live path applied a ResourceQuota")
	}
	if l, _ := tc.Kube.CoreV1().LimitRanges(ns).List(ctx, metav1.ListOptions{}); len(l.Items) != 0 {
		t.Errorf("the live path applied a LimitRange")
	}
	// Run again: nothing changed, nothing to warn about. Then with a new
	// image: the running pods keep the old one, and run says so, per
	// field, with what to do.
	code, out, errOut = cli(t, tc, "run", recipe, infra, "-n", ns, "--timeout", "3m")
	if code != 0 || strings.Contains(out, "does not roll spec changes out") {
		t.Errorf("run again, unchanged: exit %d\n%s\n%s", code, out, errOut)
	}
	spec, err := os.ReadFile(infra)
	if err != nil {
		t.Fatal(err)
	}
	newImage := strings.Replace(string(spec), "sglang: ", "sglang: registry.example/new-", 1)
	if newImage == string(spec) {
		t.Fatal("the infra spec names no sglang image")
	}
	changedInfra := filepath.Join(t.TempDir(), "grpo_swe_sglang.infra.yaml")
	if err := os.WriteFile(changedInfra, []byte(newImage), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = cli(t, tc, "run", recipe, changedInfra, "-n", ns, "--no-wait")
	for _, want := range []string{"headGroupSpec.template changes, and KubeRay does not roll spec changes out", "workerGroupSpecs[trainer].template changes",
		"launcher cluster down grpo-swe -n " + ns} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("run with a new image: exit %d, the output lacks %q\n%s\n%s", code, want, out, errOut)
		}
	}
	rc, err := tc.Ray.RayV1().RayClusters(ns).Get(ctx, "grpo-swe", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if managers := rc.GetManagedFields(); len(managers) == 0 || managers[0].Manager != "gridweave" || managers[0].Operation != metav1.ManagedFieldsOperationApply {
		t.Errorf("the RayCluster was not server-side applied by gridweave: %+v", managers)
	}

	code, out, errOut = cli(t, tc, "status", "grpo-swe", "-n", ns, "-o", "json")
	if code != 0 {
		t.Fatalf("status: exit %d\n%s\n%s", code, out, errOut)
	}
	var st launch.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status -o json: %v\n%s", err, out)
	}
	fleets := map[string]launch.FleetStatus{}
	for _, f := range st.Fleets {
		fleets[f.Fleet] = f
	}
	for fleet, want := range map[string]int{"head": 1, "trainer": 1, "inference": 1, "sandbox": 4} {
		f := fleets[fleet]
		if len(f.Pods) != want || f.Running != want {
			t.Errorf("status: fleet %s has %d pods, %d running; want %d running: %+v", fleet, len(f.Pods), f.Running, want, f)
		}
		for _, p := range f.Pods {
			if p.Node == "" {
				t.Errorf("status: pod %s has no node", p.Name)
			}
		}
	}
	if st.Cluster != "ready" || !strings.Contains(st.Dashboard, "/services/grpo-swe-head-svc:dashboard/proxy") {
		t.Errorf("status: cluster %q, dashboard %q", st.Cluster, st.Dashboard)
	}
	code, out, _ = cli(t, tc, "status", "grpo-swe", "-n", ns)
	if code != 0 || !strings.Contains(out, "sandbox 4/4 running") || !strings.Contains(out, "FLEET") {
		t.Errorf("status (table): exit %d\n%s", code, out)
	}
	// A cluster with GPU fleets: its head's NetworkPolicy selects the head
	// pod alone, and it asks for a token (authOptions; KubeRay keeps it in
	// a Secret named after the cluster), which the job commands send.
	policy, err := tc.Kube.NetworkingV1().NetworkPolicies(ns).Get(ctx, "grpo-swe-head", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	selected, err := tc.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(&policy.Spec.PodSelector)})
	if err != nil || len(selected.Items) != 1 || selected.Items[0].Labels["ray.io/node-type"] != "head" {
		t.Errorf("the head's NetworkPolicy selects %d pods (%v), want the head alone", len(selected.Items), err)
	}
	// and lets in every Ray pod of the cluster (the workers reach the GCS).
	own := policy.Spec.Ingress[0].From[0].PodSelector
	admitted, err := tc.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(own)})
	rayPods, err2 := tc.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "ray.io/cluster=grpo-swe"})
	if err != nil || err2 != nil || len(rayPods.Items) < 2 || len(admitted.Items) != len(rayPods.Items) {
		t.Errorf("the head's NetworkPolicy lets in %d pods of the cluster's %d (%v %v)", len(admitted.Items), len(rayPods.Items), err, err2)
	}
	var token string
	for deadline := time.Now().Add(30 * time.Second); token == ""; time.Sleep(250 * time.Millisecond) {
		if secret, err := tc.Kube.CoreV1().Secrets(ns).Get(ctx, "grpo-swe", metav1.GetOptions{}); err == nil {
			token = string(secret.Data["auth_token"])
		}
		if time.Now().After(deadline) {
			t.Fatal("KubeRay made no token Secret for the GPU cluster")
		}
	}
	secured := rayctltest.NewDashboard(t, token)
	if code, out, errOut = cli(t, tc, "job", "list", "--cluster", "grpo-swe", "-n", ns, "--dashboard-url", secured.URL); code != 0 {
		t.Errorf("job list on a cluster that asks for its token: exit %d\n%s\n%s", code, out, errOut)
	}
	other := rayctltest.NewDashboard(t, "another cluster's token")
	if code, _, errOut = cli(t, tc, "job", "list", "--cluster", "grpo-swe", "-n", ns, "--dashboard-url", other.URL); code != 1 || !strings.Contains(errOut, "401") {
		t.Errorf("job list with a token the dashboard refuses: exit %d: %s", code, errOut)
	}

	// The shell completion of launch names asks the cluster.
	code, out, _ = cli(t, tc, "__complete", "status", "-n", ns, "")
	if code != 0 || !strings.Contains(out, "grpo-swe\n") {
		t.Errorf("completion of launch names: exit %d\n%s", code, out)
	}

	marker := fmt.Sprintf("a line for the launcher's logs test %d", time.Now().UnixNano())
	if err := tc.AppendPodLog(marker); err != nil {
		t.Fatal(err)
	}
	head := fleets["head"].Pods[0].Name
	code, out, errOut = cli(t, tc, "logs", "grpo-swe", "head", "-n", ns, "--tail", "50")
	if code != 0 || !strings.Contains(out, "["+head+"] ") || !strings.Contains(out, marker) {
		t.Errorf("logs head: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasPrefix(line, "["+head+"] ") {
			t.Errorf("logs head printed a line of another pod: %q", line)
			break
		}
	}
	code, out, _ = cli(t, tc, "logs", "grpo-swe", "sandbox", "-n", ns, "--tail", "1")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || len(lines) != 4 {
		t.Errorf("logs sandbox --tail 1: exit %d, want one line from each of 4 pods:\n%s", code, out)
	}
	if code, _, errOut = cli(t, tc, "logs", "grpo-swe", "nonesuch", "-n", ns); code != 1 || !strings.Contains(errOut, "targets: head, submitter, sandbox") {
		t.Errorf("logs of an unknown target: exit %d: %s", code, errOut)
	}

	// A user's own objects of the same name stay: down deletes what run
	// applied, by its labels, nothing else.
	userDeployment := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "grpo-swe-dashboard", Namespace: ns, Labels: map[string]string{"app.kubernetes.io/instance": "grpo-swe"}},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "user-dashboard"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "user-dashboard", "app.kubernetes.io/instance": "grpo-swe"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}}}}}
	if _, err := tc.Kube.AppsV1().Deployments(ns).Create(ctx, userDeployment, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = cli(t, tc, "cluster", "down", "grpo-swe", "-n", ns)
	if code != 0 || !strings.Contains(out, "is gone") {
		t.Fatalf("cluster down: exit %d\n%s\n%s", code, out, errOut)
	}
	if strings.Contains(out, "grpo-swe-dashboard") {
		t.Errorf("cluster down deleted the user's Deployment:\n%s", out)
	}
	if _, err := tc.Kube.AppsV1().Deployments(ns).Get(ctx, "grpo-swe-dashboard", metav1.GetOptions{}); err != nil {
		t.Errorf("the user's Deployment is gone after cluster down: %v", err)
	}
	if err := tc.Kube.AppsV1().Deployments(ns).Delete(ctx, "grpo-swe-dashboard", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	assertNothingLeft(t, tc, ns)
	if code, out, _ = cli(t, tc, "cluster", "down", "grpo-swe", "-n", ns); code != 0 || !strings.Contains(out, "nothing of launch grpo-swe") {
		t.Errorf("cluster down again: exit %d\n%s", code, out)
	}
}

// assertNothingLeft checks that no object or pod of a launch stays.
func assertNothingLeft(t *testing.T, tc *testcluster.Cluster, ns string) {
	t.Helper()
	ctx := context.Background()
	sel := metav1.ListOptions{LabelSelector: launch.Selector("grpo-swe")}
	counts := map[string]int{}
	must := func(n int, err error) int {
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	rcs, err := tc.Ray.RayV1().RayClusters(ns).List(ctx, metav1.ListOptions{})
	counts["RayClusters"] = must(len(rcs.Items), err)
	jobs, err := tc.Ray.RayV1().RayJobs(ns).List(ctx, metav1.ListOptions{})
	counts["RayJobs"] = must(len(jobs.Items), err)
	deps, err := tc.Kube.AppsV1().Deployments(ns).List(ctx, sel)
	counts["Deployments"] = must(len(deps.Items), err)
	svcs, err := tc.Kube.CoreV1().Services(ns).List(ctx, sel)
	counts["Services"] = must(len(svcs.Items), err)
	nps, err := tc.Kube.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{})
	counts["NetworkPolicies"] = must(len(nps.Items), err)
	pdbs, err := tc.Kube.PolicyV1().PodDisruptionBudgets(ns).List(ctx, metav1.ListOptions{})
	counts["PodDisruptionBudgets"] = must(len(pdbs.Items), err)
	pods, err := tc.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app!=user-dashboard"})
	counts["Pods"] = must(len(pods.Items), err)
	for kind, n := range counts {
		if n != 0 {
			t.Errorf("after cluster down, %d %s remain in %s", n, kind, ns)
		}
	}
	if _, err := tc.Kube.CoreV1().Secrets(ns).Get(ctx, "ghcr-pull", metav1.GetOptions{}); err != nil {
		t.Errorf("cluster down deleted what it did not create: %v", err)
	}
}

// TestRunRayJobAndAPendingLaunch: `run` of the RayJob example waits until
// the RayJob's cluster runs it; a launch asking for more GPUs than the
// cluster has times out naming the pods left Pending and why.
func TestRunRayJobAndAPendingLaunch(t *testing.T) {
	tc := testcluster.Shared(t)
	ns := liveNamespace(t, tc, "live-job")
	recipe, infra := filepath.Join(specs, "grpo_swe.recipe.yaml"), filepath.Join(specs, "grpo_swe.infra.yaml")
	code, out, errOut := cli(t, tc, "run", recipe, infra, "-n", ns, "--timeout", "3m")
	if code != 0 || !strings.Contains(out, "applied RayJob "+ns+"/grpo-swe") || !strings.Contains(out, "RayJob "+ns+"/grpo-swe is running") {
		t.Fatalf("run (rayjob): exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, _ = cli(t, tc, "status", "grpo-swe", "-n", ns)
	if code != 0 || !strings.Contains(out, "RayJob: deployment Running") || !strings.Contains(out, "trainer") {
		t.Errorf("status (rayjob): exit %d\n%s", code, out)
	}
	if code, out, errOut = cli(t, tc, "cluster", "down", "grpo-swe", "-n", ns); code != 0 {
		t.Fatalf("cluster down (rayjob): exit %d\n%s\n%s", code, out, errOut)
	}
	assertNothingLeft(t, tc, ns)

	// Twenty trainer replicas of 8 GPUs: more than every node of the
	// cluster has.
	raw, err := os.ReadFile(recipe)
	if err != nil {
		t.Fatal(err)
	}
	greedy := filepath.Join(t.TempDir(), "greedy.recipe.yaml")
	if err := os.WriteFile(greedy, []byte(strings.Replace(string(raw), "replicas: 1", "replicas: 20", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	bringup := filepath.Join(specs, "grpo_swe_sglang.infra.yaml")
	pendingNS := liveNamespace(t, tc, "live-pending")
	// Ctrl-C while it waits: the launch stays, and the launcher says how
	// to follow or stop it.
	code, out = interruptWhenSeen(t, tc, "Pending: not enough nvidia.com/gpu", "run", greedy, bringup, "-n", pendingNS, "--timeout", "3m")
	if code != 130 || !strings.Contains(out, "interrupted: what was applied keeps running") || !strings.Contains(out, "launcher cluster down grpo-swe -n "+pendingNS) {
		t.Errorf("Ctrl-C while waiting: exit %d\n%s", code, out)
	}
	if _, err := tc.Ray.RayV1().RayClusters(pendingNS).Get(context.Background(), "grpo-swe", metav1.GetOptions{}); err != nil {
		t.Errorf("Ctrl-C removed the launch: %v", err)
	}
	code, out, errOut = cli(t, tc, "run", greedy, bringup, "-n", pendingNS, "--timeout", "20s")
	if code != 1 || !strings.Contains(out, "trainer pods Pending: not enough nvidia.com/gpu on") || !strings.Contains(errOut, "not running after 20s") {
		t.Errorf("a launch asking for more GPUs than exist: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, out, errOut = cli(t, tc, "cluster", "down", "grpo-swe", "-n", pendingNS); code != 0 {
		t.Errorf("cluster down (pending): exit %d\n%s\n%s", code, out, errOut)
	}
}

// TestJobCommandsAndAttach: `job list | logs | stop` and an attach launch
// talk to a Ray dashboard at --dashboard-url (the test control plane runs
// no Ray: a fake dashboard with the real API's shapes).
func TestJobCommandsAndAttach(t *testing.T) {
	tc := testcluster.Shared(t)
	ns := liveNamespace(t, tc, "live-attach")
	d := rayctltest.NewDashboard(t, "")
	attach := filepath.Join(t.TempDir(), "attach.infra.yaml")
	raw, err := os.ReadFile(filepath.Join(specs, "grpo_swe.infra.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// An attach launch: no RayJob, so none of a RayJob's bounds.
	attachText := strings.NewReplacer("mode: rayjob", "mode: attach", "  activeDeadlineSeconds: 86400\n", "", "  preRunningDeadlineSeconds: 1800\n", "", "  backoffLimit: 0\n", "").Replace(string(raw))
	if err := os.WriteFile(attach, []byte(attachText), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := cli(t, tc, "run", filepath.Join(specs, "grpo_swe.recipe.yaml"), attach, "-n", ns, "--dashboard-url", d.URL)
	if code != 0 || !strings.Contains(out, "submitted job raysubmit_") {
		t.Fatalf("run (attach): exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = cli(t, tc, "job", "list", "--dashboard-url", d.URL, "-o", "json")
	var jobs []map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &jobs) != nil || len(jobs) != 1 {
		t.Fatalf("job list: exit %d\n%s\n%s", code, out, errOut)
	}
	env, _ := jobs[0]["runtime_env"].(map[string]any)["env_vars"].(map[string]any)
	if url, _ := env["DOCKYARD_SANDBOX_URLS"].(string); !strings.HasPrefix(url, "http://grpo-swe-sandbox."+ns+".svc.cluster.local:") {
		t.Errorf("the attach job's runtime env lacks the sandbox URL: %v", jobs[0]["runtime_env"])
	}
	id := jobs[0]["submission_id"].(string)
	d.SetJobStatus(id, "RUNNING", "step 1: loss 0.93")
	if code, out, _ = cli(t, tc, "job", "logs", id, "--dashboard-url", d.URL); code != 0 || !strings.Contains(out, "loss 0.93") {
		t.Errorf("job logs: exit %d\n%s", code, out)
	}
	if code, out, _ = cli(t, tc, "job", "stop", id, "--dashboard-url", d.URL); code != 0 || !strings.Contains(out, "stopping") {
		t.Errorf("job stop: exit %d\n%s", code, out)
	}
	if code, _, errOut = cli(t, tc, "job", "list"); code != 1 || !strings.Contains(errOut, "--cluster NAME or --dashboard-url URL") {
		t.Errorf("job list without a dashboard: exit %d: %s", code, errOut)
	}
	if code, out, _ = cli(t, tc, "cluster", "down", "grpo-swe", "-n", ns); code != 0 {
		t.Errorf("cluster down (attach): exit %d\n%s", code, out)
	}
}

// TestDoctorPassesOnTheTestCluster: every check passes (warnings allowed)
// where the launch can run.
func TestDoctorPassesOnTheTestCluster(t *testing.T) {
	tc := testcluster.Shared(t)
	ns := liveNamespace(t, tc, "live-doctor")
	code, out, errOut := cli(t, tc, "doctor", filepath.Join(specs, "grpo_swe.recipe.yaml"), filepath.Join(specs, "grpo_swe.infra.yaml"), "-n", ns)
	if code != 0 {
		t.Fatalf("doctor: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"ok   CRD rayclusters.ray.io: installed, KubeRay v1.6.0 schema", "ok   operator: reconciles RayClusters in " + ns,
		"ok   priority class: training-high exists", "ok   GPU nodes (inference, trainer)", "ok   image pull secret: ghcr-pull exists", "warn network policy"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor's output lacks %q:\n%s", want, out)
		}
	}
	// Its probe leaves no pod behind to count against a quota.
	pods, err := tc.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if strings.HasPrefix(p.Labels["ray.io/cluster"], "gridweave-doctor-") {
			t.Errorf("doctor left its probe's pod %s behind", p.Name)
		}
	}
	// A quota too small for the launch's pods: doctor fails, saying so.
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "team", Namespace: ns},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("5"), "requests.nvidia.com/gpu": resource.MustParse("64")}}}
	if _, err := tc.Kube.CoreV1().ResourceQuotas(ns).Create(context.Background(), quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	code, out, _ = cli(t, tc, "doctor", filepath.Join(specs, "grpo_swe.recipe.yaml"), filepath.Join(specs, "grpo_swe.infra.yaml"), "-n", ns)
	// head + trainer + inference + 8 sandbox pods = 11.
	if code != 1 || !strings.Contains(out, "fail quota team: pods: 5 left of 5, the launch needs 11") || strings.Contains(out, "requests.nvidia.com/gpu:") {
		t.Errorf("doctor with a small quota: exit %d\n%s", code, out)
	}
}

// TestDoctorSaysHowToFix runs doctor on a control plane of its own: with
// no GPU nodes, with the operator stopped, and with KubeRay's CRDs
// deleted; each fails with its fix.
func TestDoctorSaysHowToFix(t *testing.T) {
	tc := testcluster.Start(t, nil)
	ctx := context.Background()
	ns := "doctor"
	if err := tc.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	doctor := func() (int, string) {
		code, out, errOut := cli(t, tc, "doctor", filepath.Join(specs, "grpo_swe.recipe.yaml"), filepath.Join(specs, "grpo_swe.infra.yaml"), "-n", ns, "--probe-timeout", "10s")
		return code, out + errOut
	}
	code, out := doctor()
	for _, want := range []string{"fail GPU nodes (inference, trainer): no schedulable node has 8 allocatable nvidia.com/gpu", "fix: join GPU nodes",
		"fail priority class", "fix: kubectl create priorityclass training-high", "fail image pull secret", "ok   operator"} {
		if code != 1 || !strings.Contains(out, want) {
			t.Errorf("doctor without GPU nodes: exit %d, lacks %q:\n%s", code, want, out)
		}
	}
	if err := tc.StopComponent("kuberay-operator"); err != nil {
		t.Fatal(err)
	}
	code, out = doctor()
	if code != 1 || !strings.Contains(out, "fail operator: no KubeRay operator reconciled a probe RayCluster in doctor") || !strings.Contains(out, "fix: start the KubeRay operator") {
		t.Errorf("doctor with the operator stopped: exit %d\n%s", code, out)
	}
	if err := tc.Dynamic.Resource(crdGVR).Delete(ctx, "rayclusters.ray.io", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(250 * time.Millisecond) {
		got, err := tc.Dynamic.Resource(crdGVR).Get(ctx, "rayclusters.ray.io", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			if err != nil {
				t.Fatalf("the RayCluster CRD after its deletion: %v", err)
			}
			conditions, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			t.Fatalf("the RayCluster CRD is still there 2 minutes after its deletion: %v", conditions)
		}
	}
	code, out = doctor()
	if code != 1 || !strings.Contains(out, "fail CRD rayclusters.ray.io: not installed") || !strings.Contains(out, "fix: install KubeRay v1.6.0's CRDs") {
		t.Errorf("doctor without the RayCluster CRD: exit %d\n%s", code, out)
	}
}

// TestDevSendsOnlyWhatChanged: the first `dev` brings the cluster up and
// sends the code; the second keeps the cluster and sends nothing; after an
// edit only the edited package is sent. The jobs' runtime envs name
// packages the dashboard holds.
func TestDevSendsOnlyWhatChanged(t *testing.T) {
	tc := testcluster.Shared(t)
	ctx := context.Background()
	ns := liveNamespace(t, tc, "live-dev")
	head := raytest.Shared(t)
	d, err := dashboard.New(head.DashboardURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	code := t.TempDir()
	for name, content := range map[string]string{"train.py": "import trainer\n", "trainer/__init__.py": "", "trainer/loop.py": "def run(): pass\n"} {
		path := filepath.Join(code, name)
		_ = os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dev := func() (int, string) {
		code, out, errOut := cli(t, tc, "dev", filepath.Join(specs, "grpo_swe.recipe.yaml"), filepath.Join(specs, "grpo_swe.infra.yaml"), "-n", ns,
			"--dir", code, "--dashboard-url", head.DashboardURL, "--timeout", "3m")
		return code, out + errOut
	}
	exit, out := dev()
	if exit != 0 || !strings.Contains(out, "applied RayCluster "+ns+"/grpo-swe") || strings.Count(out, "sent ") != 2 || !strings.Contains(out, "submitted job") {
		t.Fatalf("first dev: exit %d\n%s", exit, out)
	}
	rc, err := tc.Ray.RayV1().RayClusters(ns).Get(ctx, "grpo-swe", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	exit, out = dev()
	if exit != 0 || !strings.Contains(out, "is running; not touching it") || strings.Contains(out, "sent ") || strings.Count(out, "unchanged") != 2 {
		t.Errorf("second dev: exit %d\n%s", exit, out)
	}
	if again, _ := tc.Ray.RayV1().RayClusters(ns).Get(ctx, "grpo-swe", metav1.GetOptions{}); again == nil || again.UID != rc.UID || again.Generation != rc.Generation {
		t.Error("the second dev touched the cluster")
	}
	if err := os.WriteFile(filepath.Join(code, "trainer", "loop.py"), []byte("def run(): return 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	exit, out = dev()
	if exit != 0 || strings.Count(out, "sent ") != 1 || !strings.Contains(out, "sent module trainer") || !strings.Contains(out, "working dir unchanged") {
		t.Errorf("dev after an edit: exit %d\n%s", exit, out)
	}
	// Ray holds every package a job names: the working dir once, the
	// module twice (before and after the edit).
	_, listed, _ := cli(t, tc, "job", "list", "--dashboard-url", head.DashboardURL, "-o", "json")
	var jobs []map[string]any
	if err := json.Unmarshal([]byte(listed), &jobs); err != nil || len(jobs) != 3 {
		t.Fatalf("jobs: %v\n%s", err, listed)
	}
	packages := map[string]bool{}
	for _, j := range jobs {
		env, _ := j["runtime_env"].(map[string]any)
		wd, _ := env["working_dir"].(string)
		mods, _ := env["py_modules"].([]any)
		if wd == "" || len(mods) != 1 {
			t.Errorf("job %v: working_dir %q, py_modules %v", j["submission_id"], wd, mods)
			continue
		}
		for _, uri := range []string{wd, mods[0].(string)} {
			packages[uri] = true
			if held, err := d.PackageExists(ctx, uri); err != nil || !held {
				t.Errorf("job %v names %s, which Ray does not hold (%v)", j["submission_id"], uri, err)
			}
		}
	}
	if len(packages) != 3 {
		t.Errorf("the jobs name %d packages, want 3 (working dir, trainer twice): %v", len(packages), packages)
	}
	if exit, out, _ := cli(t, tc, "cluster", "down", "grpo-swe", "-n", ns); exit != 0 {
		t.Errorf("cluster down: exit %d\n%s", exit, out)
	}
}

// interruptWhenSeen runs the launcher and sends it SIGINT (Ctrl-C) once
// its output shows want (or after a minute); it returns the exit code and
// the whole output.
func interruptWhenSeen(t *testing.T, tc *testcluster.Cluster, want string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(builtLauncher(t), append([]string{"--kubeconfig", tc.KubeconfigPath}, args...)...)
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline) && !strings.Contains(out.String(), want); {
		time.Sleep(100 * time.Millisecond)
	}
	_ = cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Errorf("the launcher did not stop 30s after Ctrl-C")
	}
	return cmd.ProcessState.ExitCode(), out.String()
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestJobCommandsThroughTheServiceProxy reaches a real Ray dashboard the
// way the launcher reaches one without --dashboard-url: through the API
// server's service proxy to the RayCluster's head service. The head pod
// runs on a kwok node whose pod CIDR the test routes into a network
// namespace of its own; there, at the head pod's IP and the dashboard
// port, a real Ray head runs. So `job list`, `logs` and `stop` cross the
// real API server, the head service KubeRay made and its endpoints, and
// reach Ray itself.
func TestJobCommandsThroughTheServiceProxy(t *testing.T) {
	tc := testcluster.Shared(t)
	netnstest.RequireRoot(t)
	ctx := context.Background()
	ns := liveNamespace(t, tc, "live-proxy")
	node := ns + "-dash"
	if _, err := tc.AddNode(ctx, node, nil, nil, "198.18.252.0/24"); err != nil {
		t.Fatal(err)
	}
	rc := &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: "dash", Namespace: ns}, Spec: rayv1.RayClusterSpec{
		HeadGroupSpec: rayv1.HeadGroupSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			NodeSelector: map[string]string{corev1.LabelHostname: node},
			Containers:   []corev1.Container{{Name: "ray-head", Image: "rayproject/ray:2.54.0"}},
		}}}}}
	if _, err := tc.Ray.RayV1().RayClusters(ns).Create(ctx, rc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var podIP string
	for deadline := time.Now().Add(90 * time.Second); podIP == "" && time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		pods, err := tc.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "ray.io/cluster=dash,ray.io/node-type=head"})
		if err == nil && len(pods.Items) == 1 && pods.Items[0].Status.Phase == corev1.PodRunning {
			podIP = pods.Items[0].Status.PodIP
		}
	}
	if !strings.HasPrefix(podIP, "198.18.252.") {
		t.Fatalf("the head pod's IP %q is not in its node's pod CIDR", podIP)
	}
	// The head pod's IP lives in a namespace the test routes to.
	host := netnstest.New(t, "gwdh")
	netnstest.LinkToHost(t, "198.18.253.1/30", host, "198.18.253.2/30")
	netnstest.IP(t, "route", "add", "198.18.252.0/24", "via", "198.18.253.2")
	t.Cleanup(func() { _ = exec.Command("ip", "route", "del", "198.18.252.0/24").Run() })
	host.IP(t, "address", "add", podIP+"/32", "dev", "lo")
	head := raytest.StartNodeT(t, raytest.NodeOptions{NetNS: host.Name, IP: podIP, DashboardPort: 8265, NumCPUs: 1}, "")
	d, err := dashboard.New(head.DashboardURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.SubmitJob(ctx, dashboard.SubmitRequest{SubmissionID: "raysubmit_proxy", EntrypointNumCPUs: 0.1,
		Entrypoint: `python -c "import time; print('epoch 3 through the proxy', flush=True); time.sleep(600)"`}); err != nil {
		t.Fatal(err)
	}
	var code int
	var out, errOut string
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		// The endpoints follow the pod's readiness a moment later, and Ray
		// starts the job's driver a moment after the submission.
		if code, out, errOut = cli(t, tc, "job", "list", "--cluster", "dash", "-n", ns); code == 0 && strings.Contains(out, "RUNNING") {
			break
		}
	}
	if code != 0 || !strings.Contains(out, "raysubmit_proxy") || !strings.Contains(out, "RUNNING") {
		t.Fatalf("job list through the service proxy: exit %d\n%s\n%s", code, out, errOut)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
		code, out, _ = cli(t, tc, "job", "logs", "raysubmit_proxy", "--cluster", "dash", "-n", ns)
		if code == 0 && strings.Contains(out, "epoch 3 through the proxy") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job logs through the service proxy: exit %d\n%s", code, out)
		}
	}
	if code, out, _ = cli(t, tc, "job", "stop", "raysubmit_proxy", "--cluster", "dash", "-n", ns); code != 0 || !strings.Contains(out, "stopping") {
		t.Errorf("job stop through the service proxy: exit %d\n%s", code, out)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
		j, err := d.GetJob(ctx, "raysubmit_proxy")
		if err == nil && j.Status == "STOPPED" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Ray did not stop the job: %+v %v", j, err)
		}
	}
	if code, out, _ = cli(t, tc, "job", "stop", "raysubmit_proxy", "--cluster", "dash", "-n", ns); code != 0 || !strings.Contains(out, "was not running") {
		t.Errorf("stopping a stopped job: exit %d\n%s", code, out)
	}
}

// TestRunRefusesWhatLintCallsAnError: a launch KubeRay would refuse is
// not applied at all.
func TestRunRefusesWhatLintCallsAnError(t *testing.T) {
	tc := testcluster.Shared(t)
	ctx := context.Background()
	ns := liveNamespace(t, tc, "live-lint")
	infra := filepath.Join(t.TempDir(), "refused.infra.yaml")
	if err := os.WriteFile(infra, []byte(`namespace: dockyard
images:
  vllm: ghcr.io/dockyard/ubuntu-swe:vllm-2026.11
launch:
  mode: bringup
kuberay:
  spec:
    headGroupSpec:
      resources:
        CPU: "4"
      rayStartParams:
        num-cpus: "4"
sandbox:
  image: ghcr.io/dockyard/ubuntu-swe-executor:2026.11
`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := cli(t, tc, "run", filepath.Join(specs, "grpo_swe.recipe.yaml"), infra, "-n", ns)
	if code != 1 || !strings.Contains(out, "error [resources-and-start-params]") || !strings.Contains(errOut, "lint found errors; nothing was applied") {
		t.Errorf("run of a launch KubeRay refuses: exit %d\n%s\n%s", code, out, errOut)
	}
	if deps, _ := tc.Kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{}); len(deps.Items) != 0 {
		t.Errorf("a refused launch applied %d Deployments", len(deps.Items))
	}
	if rcs, _ := tc.Ray.RayV1().RayClusters(ns).List(ctx, metav1.ListOptions{}); len(rcs.Items) != 0 {
		t.Errorf("a refused launch applied a RayCluster")
	}
}

// TestJobSubmitSendsTheCodeAndFollowsIt: `job submit` against a real Ray
// head sends the local working dir and its module, runs the entrypoint
// with the runtime env the flags make, follows the log to the end and
// exits 0; a second submit sends nothing the cluster holds; a failing job
// exits 1 with its status; --no-wait prints the id and returns.
func TestJobSubmitSendsTheCodeAndFollowsIt(t *testing.T) {
	tc := testcluster.Shared(t)
	head := raytest.Shared(t)
	code := t.TempDir()
	for name, content := range map[string]string{
		"main.py":              "import os, sys\nfrom greeter import greet\nprint(greet(os.environ['WHO']), os.environ['FROM_FILE'], os.environ['FROM_JSON'], sys.argv[1], flush=True)\n",
		"greeter/__init__.py":  "def greet(who):\n    return 'hello ' + who\n",
		"runtime-env.yaml":     "env_vars:\n  FROM_FILE: file\n  FROM_JSON: overridden\n",
		"notes/ignored.txt":    "x",
		"greeter/unused.json":  "{}",
		"greeter/more/deep.py": "",
	} {
		path := filepath.Join(code, name)
		_ = os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	submit := func(args ...string) (int, string) {
		all := append([]string{"job", "submit", "--dashboard-url", head.DashboardURL, "--entrypoint-num-cpus", "0.1"}, args...)
		code, out, errOut := cli(t, tc, all...)
		return code, out + errOut
	}
	exit, out := submit("--working-dir", code, "--runtime-env", filepath.Join(code, "runtime-env.yaml"),
		"--runtime-env-json", `{"env_vars":{"FROM_FILE":"file","FROM_JSON":"json"}}`, "--env", "WHO=gridweave", "--", "python", "main.py", "first")
	if exit != 0 || !strings.Contains(out, "hello gridweave file json first") || !strings.Contains(out, "SUCCEEDED") || strings.Count(out, "sent ") != 2 {
		t.Fatalf("job submit: exit %d\n%s", exit, out)
	}
	// The working dir named in the runtime env, as ray job submit takes
	// it, is sent the same way (and is unchanged).
	exit, out = submit("--runtime-env-json", `{"working_dir":"`+code+`","env_vars":{"WHO":"again","FROM_FILE":"f","FROM_JSON":"j"}}`, "--", "python", "main.py", "second word")
	if exit != 0 || !strings.Contains(out, "hello again f j second word") || strings.Contains(out, "sent ") || strings.Count(out, "unchanged") != 2 {
		t.Errorf("a second submit of the same code: exit %d\n%s", exit, out)
	}
	// Each word of the entrypoint reaches the shell as one.
	exit, out = submit("--submission-id", "raysubmit_fails", "--", "python", "-c", `import sys; print("giving up", sys.argv[1:]); sys.exit(3)`, "it's")
	if exit != 1 || !strings.Contains(out, `giving up ["it's"]`) || !strings.Contains(out, "job raysubmit_fails FAILED") {
		t.Errorf("a failing job: exit %d\n%s", exit, out)
	}
	exit, out = submit("--no-wait", "--", "python", "-c", "import time; time.sleep(1)")
	if exit != 0 || !strings.Contains(out, "submitted job raysubmit_") || strings.Contains(out, "SUCCEEDED") {
		t.Errorf("--no-wait: exit %d\n%s", exit, out)
	}
	for _, bad := range [][]string{{"--env", "NOEQUALS", "--", "true"}, {"--runtime-env-json", "{", "--", "true"}, {"--", " "},
		{"--runtime-env-json", "null", "--env", "A=B", "--", "true"}, {"--runtime-env-json", `{"py_modules":["./greeter"]}`, "--", "true"}} {
		if exit, out = submit(bad...); exit != 1 {
			t.Errorf("job submit %v: exit %d, want 1\n%s", bad, exit, out)
		}
	}
}
