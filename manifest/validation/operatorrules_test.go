package validation_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"gridweave.dev/internal/testcluster"
	"gridweave.dev/manifest/validation"
)

// mishandledRules are the rules for objects the API server and KubeRay's
// validation admit and the operator then mishandles without refusing them:
// no event says so, so TestOperatorMishandles holds each to what the
// operator visibly does, not TestLintAgreesWithTheRealSystems.
var mishandledRules = map[string]bool{"group-name-label": true, "duplicate-group-name": true}

// silentRules are those of mishandledRules the operator says nothing
// about (no event): TestLintAgreesWithTheRealSystems leaves them to
// TestOperatorMishandles. (For group-name-label the operator records the
// API server's refusal of each pod, which that test sees too.)
var silentRules = map[string]bool{"duplicate-group-name": true}

// TestOperatorMishandles creates, on the real operator, every RayCluster
// of the users' corpus for which lint reports one of mishandledRules, and
// shows what the operator does with it: with a group name that is not a
// label value, no worker pod ever exists (the API server refuses each);
// with two groups of one name, the cluster gets fewer workers than the
// groups ask for. A rule that stops matching the operator fails here.
func TestOperatorMishandles(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the test control plane")
	}
	tc := testcluster.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	big := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("1000"), corev1.ResourceMemory: resource.MustParse("16Ti"),
		corev1.ResourcePods: resource.MustParse("1000"),
	}
	if _, err := tc.AddNode(ctx, "mishandled-node", big, nil, ""); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("testdata/users/*.yaml")
	seen := map[string]int{}
	for _, file := range files {
		docs, err := validation.LoadDocuments(file)
		if err != nil {
			t.Fatal(err)
		}
		for i, d := range docs {
			rule := ""
			for _, f := range validation.Lint(validator, []validation.Document{d}) {
				if mishandledRules[f.ID] {
					rule = f.ID
				} else if f.Severity == validation.SeverityError {
					rule = "" // refused for another reason too: not this test's
					break
				}
			}
			if rule == "" {
				continue
			}
			rc := &rayv1.RayCluster{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(d.Object.Object, rc); err != nil {
				t.Fatalf("%s: %v", d.Source, err)
			}
			ns := fmt.Sprintf("mishandled-%d-%d", seen[rule]+len(seen)*10, i)
			if err := tc.CreateNamespace(ctx, ns); err != nil {
				t.Fatal(err)
			}
			rc.Namespace = ns
			if _, err := tc.Ray.RayV1().RayClusters(ns).Create(ctx, rc, metav1.CreateOptions{}); err != nil {
				t.Fatalf("%s: the API server refuses it, lint only warns of the operator: %v", d.Source, err)
			}
			want := int32(0)
			for _, g := range rc.Spec.WorkerGroupSpecs {
				want += ptr.Deref(g.Replicas, 0)
			}
			workers, events := settledWorkers(ctx, t, tc, ns)
			switch rule {
			case "group-name-label":
				if workers != 0 || !strings.Contains(events, "FailedToCreateWorkerPod") {
					t.Errorf("%s: %d worker pods, warning events %.300s; lint says the API server refuses every worker pod", d.Source, workers, events)
				}
			case "duplicate-group-name":
				if workers >= want {
					t.Errorf("%s: %d worker pods for %d replicas; lint says the groups share their pods", d.Source, workers, want)
				}
			}
			t.Logf("%s: %s: %d worker pods for %d replicas asked", d.Source, rule, workers, want)
			seen[rule]++
		}
	}
	for rule := range mishandledRules {
		if seen[rule] == 0 {
			t.Errorf("no document of the users' corpus shows %s", rule)
		}
	}
}

// settledWorkers waits until the operator has acted on a namespace's
// RayCluster (the head pod exists) and the number of worker pods has not
// changed for ten seconds; it returns that number and the warning events.
func settledWorkers(ctx context.Context, t *testing.T, tc *testcluster.Cluster, ns string) (int32, string) {
	t.Helper()
	last, stableSince := int32(-1), time.Now()
	for {
		pods, err := tc.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		head, workers := false, int32(0)
		for _, p := range pods.Items {
			switch p.Labels["ray.io/node-type"] {
			case "head":
				head = true
			case "worker":
				workers++
			}
		}
		if workers != last {
			last, stableSince = workers, time.Now()
		}
		if head && time.Since(stableSince) > 10*time.Second {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("%s: the operator did not settle: head %v, %d workers", ns, head, workers)
		}
		time.Sleep(time.Second)
	}
	events, err := tc.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range events.Items {
		if e.Type == corev1.EventTypeWarning {
			fmt.Fprintf(&b, "[%s: %s] ", e.Reason, e.Message)
		}
	}
	return last, b.String()
}

// TestOperatorRulesFindings: which cluster specs each operator rule finds.
func TestOperatorRulesFindings(t *testing.T) {
	base := rayClusterDoc("rules")
	group := func(name string) string {
		return strings.Replace(base, "groupName: gpu", "groupName: "+name, 1)
	}
	sidecarFirst := strings.Replace(base, "        containers:\n        - name: ray-worker",
		"        containers:\n        - name: log-shipper\n          image: fluent/fluent-bit:3.0\n        - name: ray-worker", 1)
	for _, c := range []struct {
		name, doc, id, path string
	}{
		{"a pod-name-safe group name", group("gpu-a100.x1"), "", ""},
		{"capitals (the pod name is lowercased)", group("GPU-A100"), "", ""},
		{"an underscore", group("gpu_a100"), "group-name-label", "spec.workerGroupSpecs[0].groupName"},
		{"spaces and a bang", group(`"GPU Workers!"`), "group-name-label", "spec.workerGroupSpecs[0].groupName"},
		{"64 characters", group(strings.Repeat("g", 64)), "group-name-label", "spec.workerGroupSpecs[0].groupName"},
		{"a sidecar before Ray", sidecarFirst, "ray-container-first", "spec.workerGroupSpecs[0].template.spec.containers[0]"},
		{"CPUs in words", strings.Replace(base, "rayStartParams: {}", `rayStartParams: {num-cpus: "two"}`, 1), "ray-start-param", "spec.headGroupSpec.rayStartParams.num-cpus"},
		{"a port in words", strings.Replace(base, "rayStartParams: {}", `rayStartParams: {dashboard-port: "http"}`, 1), "ray-start-param", "spec.headGroupSpec.rayStartParams.dashboard-port"},
		{"resources not JSON", strings.Replace(base, "rayStartParams: {}", `rayStartParams: {resources: "{TPU: 4}"}`, 1), "ray-start-param", "spec.headGroupSpec.rayStartParams.resources"},
		{"a number from the environment", strings.Replace(base, "rayStartParams: {}", `rayStartParams: {num-cpus: "$NUM_CPUS"}`, 1), "", ""},
		{"resources as JSON", strings.Replace(base, "rayStartParams: {}", `rayStartParams: {resources: '"{\"TPU\": 4}"'}`, 1), "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []validation.Finding
			for _, f := range lintString(t, c.doc) {
				if f.ID == "group-name-label" || f.ID == "duplicate-group-name" || f.ID == "ray-container-first" || f.ID == "ray-start-param" {
					got = append(got, f)
				}
			}
			if c.id == "" {
				if len(got) > 0 {
					t.Fatalf("want nothing, got %v", got)
				}
				return
			}
			if len(got) != 1 || got[0].ID != c.id || got[0].Path != c.path {
				t.Fatalf("want %s at %s, got %v", c.id, c.path, got)
			}
		})
	}
}

// TestRayStartParamsReachRayStartVerbatim: the operator does not check
// rayStartParams values — its own pod construction (KubeRay v1.6.0's
// BuildPod, through ComputeStartResources' command) puts them into the ray
// start command as they are — so a value ray start refuses is only found
// when the pod starts.
func TestRayStartParamsReachRayStartVerbatim(t *testing.T) {
	spec := &rayv1.RayClusterSpec{HeadGroupSpec: rayv1.HeadGroupSpec{
		RayStartParams: map[string]string{"dashboard-port": "http"},
		Template:       corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "ray-head", Image: "rayproject/ray:2.52.0"}}}},
	}}
	rs, err := validation.ComputeStartResources("c", spec)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rs[0].Command, "--dashboard-port=http") {
		t.Fatalf("the operator's ray start command: %s", rs[0].Command)
	}
}
