package launchcli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"gridweave.dev/internal/raytest"
	"gridweave.dev/internal/testcluster"
	"gridweave.dev/manifest"
	"gridweave.dev/rayctl"
)

func TestMain(m *testing.M) {
	code := raytest.RunMain(raytest.RunFunc(func() int { return testcluster.RunMain(m) }))
	if launcherBinary.path != "" {
		_ = os.RemoveAll(filepath.Dir(launcherBinary.path))
	}
	os.Exit(code)
}

// runs counts the real-cluster tests' runs, which share one cluster.
var runs atomic.Int32

// TestRenderedLaunchRunsOnARealControlPlane applies what `render` makes
// for both example infra specs to a real API server with the real KubeRay
// operator and kwok GPU nodes: every object is accepted, the sandbox pool
// becomes available and the GPU RayCluster (or the RayJob's cluster) ready.
func TestRenderedLaunchRunsOnARealControlPlane(t *testing.T) {
	tc := testcluster.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	big := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("96"), corev1.ResourceMemory: resource.MustParse("1Ti"),
		corev1.ResourceEphemeralStorage: resource.MustParse("2Ti"), "nvidia.com/gpu": resource.MustParse("8"),
	}
	run := int(runs.Add(1)) // fresh node names when run again (-count)
	for i := range 4 {
		name := fmt.Sprintf("launch%d-gpu-%d", run, i)
		if _, err := tc.AddNode(ctx, name, big, nil, fmt.Sprintf("198.18.%d.0/24", 10+4*run+i)); err != nil {
			t.Fatal(err)
		}
	}
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "training-high"}, Value: 1000}
	if _, err := tc.Kube.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	c, err := rayctl.New(tc.Kube, tc.Ray, nil)
	if err != nil {
		t.Fatal(err)
	}
	c = c.WithDynamic(tc.Dynamic)

	// Beside the examples, a launch with every option of the specs that
	// reaches the objects: an autoscaled fleet, a RayJob's retries and
	// deadline, GPU pods without capabilities, sandbox egress limited to
	// CIDRs, a kuberay.spec override of one group.
	options := t.TempDir()
	recipeText, err := os.ReadFile(filepath.Join(specs, "grpo_swe.recipe.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	infraText, err := os.ReadFile(filepath.Join(specs, "grpo_swe.infra.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	autoscaled := strings.Replace(string(recipeText), "  inference:\n    replicas: 1\n", "  inference:\n    replicas: 1\n    minReplicas: 0\n    maxReplicas: 2\n", 1)
	everyOption := strings.NewReplacer("namespace: dockyard\n", "namespace: dockyard-options\n",
		"  activeDeadlineSeconds: 86400\n  preRunningDeadlineSeconds: 1800\n  backoffLimit: 0\n", "  activeDeadlineSeconds: 7200\n  preRunningDeadlineSeconds: 600\n  backoffLimit: 1\n  submitterConfig: {backoffLimit: 3}\n",
		"  rayVersion: \"2.54.0\"\n", "  rayVersion: \"2.54.0\"\n  spec:\n    workerGroupSpecs:\n    - groupName: trainer\n      template: {spec: {containers: [{name: ray-worker, env: [{name: NCCL_DEBUG, value: INFO}]}]}}\n",
		"  injectUrls: true\n", "  injectUrls: true\n  networkPolicy: {allowedEgressCidrs: [198.18.200.0/24]}\n",
		"  priorityClassName: training-high\n", "  priorityClassName: training-high\n  security: {enabled: true, ipcLock: true}\n").Replace(string(infraText))
	if autoscaled == string(recipeText) || strings.Count(everyOption, "\n") < strings.Count(string(infraText), "\n")+7 {
		t.Fatal("the example specs changed: the options are not written in")
	}
	for path, text := range map[string]string{"options.recipe.yaml": autoscaled, "options.infra.yaml": everyOption} {
		if err := os.WriteFile(filepath.Join(options, path), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, launch := range []struct{ name, recipe, infra string }{
		{"grpo_swe.infra.yaml", filepath.Join(specs, "grpo_swe.recipe.yaml"), filepath.Join(specs, "grpo_swe.infra.yaml")},
		{"grpo_swe_sglang.infra.yaml", filepath.Join(specs, "grpo_swe.recipe.yaml"), filepath.Join(specs, "grpo_swe_sglang.infra.yaml")},
		{"every option", filepath.Join(options, "options.recipe.yaml"), filepath.Join(options, "options.infra.yaml")},
	} {
		t.Run(launch.name, func(t *testing.T) {
			r, err := manifest.LoadRecipe(launch.recipe)
			if err != nil {
				t.Fatal(err)
			}
			in, err := manifest.LoadInfra(launch.infra)
			if err != nil {
				t.Fatal(err)
			}
			objs, err := manifest.Render(r, in)
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.CreateNamespace(ctx, in.Namespace); err != nil {
				t.Fatal(err)
			}
			var seen []string
			applied, err := c.Apply(ctx, objs, rayctl.ApplyOptions{Wait: true, WaitOptions: rayctl.WaitOptions{
				Timeout:  3 * time.Minute,
				Progress: func(p rayctl.Progress) { seen = append(seen, p.Kind+" "+p.Name+": "+p.State) },
			}})
			if err != nil {
				t.Fatalf("%v\nprogress: %v", err, seen)
			}
			if len(applied) != len(objs) {
				t.Fatalf("applied %d of %d", len(applied), len(objs))
			}
			// The GPU workers landed on GPU nodes with 8 GPUs each.
			pods, err := tc.Kube.CoreV1().Pods(in.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "ray.io/node-type=worker"})
			if err != nil {
				t.Fatal(err)
			}
			if len(pods.Items) != 2 {
				t.Fatalf("%d GPU workers, want trainer and inference", len(pods.Items))
			}
			for _, p := range pods.Items {
				if p.Status.Phase != corev1.PodRunning {
					t.Errorf("worker %s is %s: %+v\nprogress: %v", p.Name, p.Status.Phase, p.Status.Conditions, seen)
				}
				if q := p.Spec.Containers[0].Resources.Limits["nvidia.com/gpu"]; q.Value() != 8 {
					t.Errorf("worker %s GPU limit %s", p.Name, q.String())
				}
				if launch.name != "every option" {
					continue
				}
				// What the options asked for reached the pods.
				sc := p.Spec.Containers[0].SecurityContext
				if sc == nil || sc.Capabilities == nil || fmt.Sprint(sc.Capabilities.Drop) != "[ALL]" || fmt.Sprint(sc.Capabilities.Add) != "[IPC_LOCK]" {
					t.Errorf("worker %s capabilities: %+v", p.Name, sc)
				}
				if group := p.Labels["ray.io/group"]; group == "trainer" && envValue(p.Spec.Containers[0].Env, "NCCL_DEBUG") != "INFO" {
					t.Errorf("the trainer's worker lacks the override's NCCL_DEBUG: %v", p.Spec.Containers[0].Env)
				}
			}
			if launch.name == "every option" {
				job, err := tc.Ray.RayV1().RayJobs(in.Namespace).Get(ctx, r.Name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if s := job.Spec; s.BackoffLimit == nil || *s.BackoffLimit != 1 || s.ActiveDeadlineSeconds == nil || *s.ActiveDeadlineSeconds != 7200 ||
					s.PreRunningDeadlineSeconds == nil || *s.PreRunningDeadlineSeconds != 600 ||
					s.SubmitterConfig == nil || *s.SubmitterConfig.BackoffLimit != 3 || s.RayClusterSpec.EnableInTreeAutoscaling == nil || !*s.RayClusterSpec.EnableInTreeAutoscaling {
					t.Errorf("the RayJob as the API server holds it: %+v", s)
				}
				np, err := tc.Kube.NetworkingV1().NetworkPolicies(in.Namespace).Get(ctx, "grpo-swe-sandbox", metav1.GetOptions{})
				if err != nil || len(np.Spec.Egress) != 2 {
					t.Errorf("the sandbox's NetworkPolicy: %v %+v", err, np)
				}
				if _, err := tc.Kube.NetworkingV1().NetworkPolicies(in.Namespace).Get(ctx, "grpo-swe-head", metav1.GetOptions{}); err != nil {
					t.Errorf("the GPU head's NetworkPolicy: %v", err)
				}
			}
			// The sandbox URL every Ray pod is given names the sandbox Service,
			// whose endpoints are the sandbox pods; pods get the infra spec's
			// priority class.
			for _, p := range pods.Items {
				url := envValue(p.Spec.Containers[0].Env, manifest.SandboxURLsEnv)
				var svcName, svcNamespace string
				var svcPort int32
				if _, err := fmt.Sscanf(strings.ReplaceAll(strings.TrimPrefix(url, "http://"), ".", " "), "%s %s svc cluster local:%d", &svcName, &svcNamespace, &svcPort); err != nil {
					t.Fatalf("worker %s: %s=%q: %v", p.Name, manifest.SandboxURLsEnv, url, err)
				}
				svc, err := tc.Kube.CoreV1().Services(svcNamespace).Get(ctx, svcName, metav1.GetOptions{})
				if err != nil {
					t.Fatalf("worker %s: %s=%q: %v", p.Name, manifest.SandboxURLsEnv, url, err)
				}
				if len(svc.Spec.Ports) == 0 || svc.Spec.Ports[0].Port != svcPort {
					t.Errorf("sandbox Service %s ports %v, the URL says %d", svcName, svc.Spec.Ports, svcPort)
				}
				sandboxPods, err := tc.Kube.CoreV1().Pods(svcNamespace).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(svc.Spec.Selector).String()})
				if err != nil {
					t.Fatal(err)
				}
				var endpoints []string
				for deadline := time.Now().Add(time.Minute); len(endpoints) < len(sandboxPods.Items) && time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
					endpoints = endpointAddresses(ctx, t, tc, svcNamespace, svcName)
				}
				if len(sandboxPods.Items) == 0 || len(endpoints) != len(sandboxPods.Items) {
					var states []string
					for _, sp := range sandboxPods.Items {
						states = append(states, fmt.Sprintf("%s %s %s ready=%v", sp.Name, sp.Status.Phase, sp.Status.PodIP, podReady(&sp)))
					}
					t.Fatalf("sandbox Service %s/%s: endpoints %v for sandbox pods %v", svcNamespace, svcName, endpoints, states)
				}
				if want := in.Infra.PriorityClassName; want != "" && p.Spec.PriorityClassName != want {
					t.Errorf("worker %s priority class %q, want %q", p.Name, p.Spec.PriorityClassName, want)
				}
			}

			// Every disruption budget works: the disruption controller can
			// count the pods it covers (a budget over pods whose owner has no
			// scale subresource, like a RayCluster, fails with maxUnavailable
			// or a percentage).
			pdbs, err := tc.Kube.PolicyV1().PodDisruptionBudgets(in.Namespace).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, pdb := range pdbs.Items {
				var cond *metav1.Condition
				for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
					got, err := tc.Kube.PolicyV1().PodDisruptionBudgets(in.Namespace).Get(ctx, pdb.Name, metav1.GetOptions{})
					if err != nil {
						t.Fatal(err)
					}
					cond = meta.FindStatusCondition(got.Status.Conditions, policyv1.DisruptionAllowedCondition)
					if cond != nil && got.Status.ObservedGeneration == got.Generation && got.Status.CurrentHealthy > 0 {
						break
					}
				}
				if cond == nil || cond.Reason == policyv1.SyncFailedReason {
					t.Errorf("PodDisruptionBudget %s does not work: %+v", pdb.Name, cond)
				}
			}
			if err := c.DeleteObjects(ctx, objs, rayctl.DeleteOptions{Wait: true, Timeout: 2 * time.Minute}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestChartServesTheHeadOnARealControlPlane applies what `chart render`
// makes (both example values; kinds the cluster does not serve, like
// NebariApp, left out) to a real API server with the real KubeRay
// operator: the chart's own dashboard and serve Services end up with the
// RayService's head pod — and only it — as their endpoint, KubeRay leaves
// them alone, and the GPU workers start with the CA-bundle init container.
func TestChartServesTheHeadOnARealControlPlane(t *testing.T) {
	tc := testcluster.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	gpuNode := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi"),
		corev1.ResourcePods: resource.MustParse("110"), "nvidia.com/gpu": resource.MustParse("8"),
	}
	run := runs.Add(1) // fresh names when run again (-count)
	if _, err := tc.AddNode(ctx, fmt.Sprintf("chart%d-gpu-0", run), gpuNode, nil, ""); err != nil {
		t.Fatal(err)
	}
	c, err := rayctl.New(tc.Kube, tc.Ray, nil)
	if err != nil {
		t.Fatal(err)
	}
	c = c.WithDynamic(tc.Dynamic)
	for i, valuesFile := range []string{"values.yaml", "values-gpu-nebari.yaml"} {
		t.Run(valuesFile, func(t *testing.T) {
			values, err := manifest.LoadChartValues(filepath.Join("..", "..", "..", "examples", "launcher", "chart", valuesFile))
			if err != nil {
				t.Fatal(err)
			}
			values.Namespace = fmt.Sprintf("chart%d-%d", run, i)
			objs, err := manifest.RenderChart(values, manifest.ChartRelease{})
			if err != nil {
				t.Fatal(err)
			}
			var served []*unstructured.Unstructured
			for _, o := range objs {
				if o.GetAPIVersion() == "v1" || o.GroupVersionKind().Group == "ray.io" {
					served = append(served, o)
				}
			}
			if err := tc.CreateNamespace(ctx, values.Namespace); err != nil {
				t.Fatal(err)
			}
			ca := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "org-root-ca"}, Data: map[string]string{"ca.crt": "test CA"}}
			if _, err := tc.Kube.CoreV1().ConfigMaps(values.Namespace).Create(ctx, ca, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Apply(ctx, served, rayctl.ApplyOptions{}); err != nil {
				t.Fatal(err)
			}

			// The head of the RayService's cluster runs and is ready.
			var head *corev1.Pod
			for head == nil {
				pods, err := tc.Kube.CoreV1().Pods(values.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "ray.io/node-type=head"})
				if err != nil {
					t.Fatal(err)
				}
				for i, p := range pods.Items {
					if p.Status.PodIP != "" && podReady(&p) {
						head = &pods.Items[i]
					}
				}
				if head == nil {
					select {
					case <-ctx.Done():
						t.Fatalf("no ready head pod: %v", ctx.Err())
					case <-time.After(500 * time.Millisecond):
					}
				}
			}

			// Each of the chart's Services has exactly the head as endpoint.
			for _, svc := range []string{values.Name + "-dashboard", values.Name + "-serve"} {
				var addresses []string
				for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
					addresses = endpointAddresses(ctx, t, tc, values.Namespace, svc)
					if len(addresses) > 0 {
						break
					}
				}
				if len(addresses) != 1 || addresses[0] != head.Status.PodIP {
					t.Errorf("Service %s has endpoints %v, want the head %s", svc, addresses, head.Status.PodIP)
				}
				got, err := tc.Kube.CoreV1().Services(values.Namespace).Get(ctx, svc, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				for _, ref := range got.OwnerReferences {
					t.Errorf("Service %s was adopted by %s %s", svc, ref.Kind, ref.Name)
				}
			}

			if values.OrgCABundle.ConfigMapName != "" {
				// The GPU workers start, each with the CA bundle builder.
				for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(500 * time.Millisecond) {
					workers, err := tc.Kube.CoreV1().Pods(values.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "ray.io/node-type=worker"})
					if err != nil {
						t.Fatal(err)
					}
					running := 0
					for _, w := range workers.Items {
						if w.Status.Phase == corev1.PodRunning {
							running++
						}
						if !hasInitContainer(&w, "build-ca-bundle") {
							t.Fatalf("worker %s has no CA bundle init container", w.Name)
						}
					}
					if want := int(ptr.Deref(values.Worker.Replicas, 1)); running == want {
						break
					} else if time.Now().After(deadline) {
						t.Fatalf("%d of %d GPU workers running", running, want)
					}
				}
			}
			if err := c.DeleteObjects(ctx, served, rayctl.DeleteOptions{Wait: true, Timeout: 2 * time.Minute}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func envValue(env []corev1.EnvVar, name string) string {
	for _, e := range env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func hasInitContainer(p *corev1.Pod, name string) bool {
	for _, c := range p.Spec.InitContainers {
		if c.Name == name {
			return true
		}
	}
	return false
}

// endpointAddresses are the ready addresses of a Service's EndpointSlices.
func endpointAddresses(ctx context.Context, t *testing.T, tc *testcluster.Cluster, namespace, service string) []string {
	t.Helper()
	slices, err := tc.Kube.DiscoveryV1().EndpointSlices(namespace).List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=" + service})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				out = append(out, e.Addresses...)
			}
		}
	}
	return out
}
