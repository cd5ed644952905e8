package validation_test

import (
	"context"
	"fmt"
	"path/filepath"
	goruntime "runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/ray-project/kuberay/ray-operator/controllers/ray/batchscheduler/yunikorn"
	"github.com/ray-project/kuberay/ray-operator/controllers/ray/common"
	"github.com/ray-project/kuberay/ray-operator/pkg/features"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"gridweave.dev/internal/testcluster"
	"gridweave.dev/manifest/validation"
)

// mishandledRules are the rules for objects the API server and KubeRay's
// validation admit and the operator then mishandles without refusing them
// at admission: TestOperatorMishandles holds each to what the operator
// visibly does.
var mishandledRules = map[string]bool{
	"group-name-label": true, "duplicate-group-name": true, "head-service-refused": true,
	"serve-port-missing": true, "num-of-hosts": true, "workers-to-delete-name": true,
	"operator-container-name": true, "auth-mode-unset": true, "group-resource-quantity": true,
	"nested-upgrade-strategy": true, "nested-cluster-suspended": true, "submission-mode": true,
	"redis-credential": true, "dashboard-port-missing": true, "head-service-selects-nothing": true,
	"ingress-refused": true, "autoscaler-service-account": true, "submitter-refused": true, "submit-command": true,
	"entrypoint-resources": true, "entrypoint-missing": true, "redis-address-missing": true,
	// warnings: what they say happens depends on the cluster, but happens
	// on the test's
	"ray-container-first": true, "operator-env-overrides": true, "annotation-bool": true,
	"autoscaler-options-ignored": true, "workers-to-delete-foreign": true, "rayjob-field-ignored": true,
	"fault-tolerance-ignored": true, "service-field-ignored": true, "originated-from-crd-label": true,
}

// silentRules are those of mishandledRules the operator records no
// refusal for (no Invalid*Spec event, no pod or Service the API server
// refuses): TestLintAgreesWithTheRealSystems leaves them to
// TestOperatorMishandles.
var silentRules = map[string]bool{
	"duplicate-group-name": true, "serve-port-missing": true, "num-of-hosts": true,
	"workers-to-delete-name": true, "auth-mode-unset": true, "group-resource-quantity": true,
	"nested-cluster-suspended": true, "submission-mode": true, "dashboard-port-missing": true,
	"head-service-selects-nothing": true, "submit-command": true,
	// the API server forbids the head pod (no such service account), and
	// refuses nothing as invalid
	"autoscaler-service-account": true,
	// the submitter Job is made; what it runs fails in Ray's CLI
	"entrypoint-resources": true, "entrypoint-missing": true,
	"redis-address-missing": true,
}

// TestOperatorMishandles creates, on the real operator, every RayCluster
// and RayJob of the users' corpus for which lint reports one of
// mishandledRules, and shows what the operator does with it — what each
// rule's message says will happen:
//   - group-name-label: no worker pod ever exists (the API server refuses
//     each: FailedToCreateWorkerPod);
//   - duplicate-group-name: fewer workers than the groups ask for;
//   - head-service-refused: FailedToCreateService, and no pod at all;
//   - serve-port-missing: the head Service, then no pod at all;
//   - num-of-hosts: the head, no worker;
//   - workers-to-delete-name: FailedToDeleteWorkerPod, no worker;
//   - operator-container-name: FailedToCreateWorkerPod, no worker;
//   - auth-mode-unset: the operator makes the token Secret, and gives the
//     head no RAY_AUTH_MODE;
//   - group-resource-quantity: the worker's ray start command lacks the
//     resource;
//   - nested-upgrade-strategy: the RayJob's RayCluster gets
//     InvalidRayClusterSpec, and no pod;
//   - nested-cluster-suspended: the RayJob's RayCluster gets no pod;
//   - submission-mode: the RayJob is Running on a ready cluster with no
//     submitter Job, where the same RayJob in K8sJobMode gets one;
//   - redis-credential: FailedToCreateHeadPod, and no pod;
//   - dashboard-port-missing: the RayJob's cluster is ready, the RayJob
//     never leaves Initializing;
//   - operator-container-name in a SidecarMode RayJob:
//     FailedToCreateRayCluster, and no pod;
//   - head-service-selects-nothing: the head pod runs, and the head
//     Service's selector selects no pod;
//   - ingress-refused: FailedToCreateIngress, and no pod;
//   - autoscaler-service-account: with the account of the name written
//     made, FailedToCreateHeadPod, and no pod;
//   - submitter-refused: FailedToCreateRayJobSubmitter, and no Job;
//   - submit-command: the RayJob's cluster is ready, the RayJob never
//     leaves Initializing and no submitter Job is made;
//   - entrypoint-resources, entrypoint-missing: the submitter Job runs
//     `ray job submit` with the resources as written, or with nothing
//     after "--" (what Ray's CLI then refuses needs a running Ray:
//     TestRayJobSubmitCommandVerbatim holds it to the operator's command);
//
// and the warnings:
//   - ray-container-first: the head's first container, a sidecar, is
//     given the ray start command;
//   - operator-env-overrides: the operator's value comes last, in the
//     head or in the submitter Job;
//   - annotation-bool: no serve Service for "True";
//   - autoscaler-options-ignored: no autoscaler container;
//   - workers-to-delete-foreign: the pod of that name, not Ray's, is
//     deleted;
//   - rayjob-field-ignored: no RayCluster from the rayClusterSpec beside a
//     clusterSelector;
//   - fault-tolerance-ignored: a head without the storage namespace
//     written; or, with ray.io/ft-enabled and no Redis, a head with a
//     storage namespace and no Redis address, and the Redis cleanup
//     finalizer on the RayCluster;
//   - service-field-ignored: the head Service's selector is the
//     operator's;
//   - originated-from-crd-label: a head labelled not serving, as for a
//     RayService's cluster.
//
// and redis-address-missing: a head given an empty RAY_REDIS_ADDRESS
// (which Ray's node.py then fails to split into host and port: kwok's
// pods run no Ray).
//
// A rule that stops matching the operator fails here.
func TestOperatorMishandles(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the test control plane")
	}
	tc := testcluster.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
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
	n := 0
	var checks []concurrentCheck
	for _, file := range files {
		docs, err := validation.LoadDocuments(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range docs {
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
			n++
			ns := fmt.Sprintf("mishandled-%d", n)
			if err := tc.CreateNamespace(ctx, ns); err != nil {
				t.Fatal(err)
			}
			checks = append(checks, concurrentCheck{fmt.Sprintf("%s %s", rule, d.Object.GetName()), func(t testing.TB) {
				showMishandling(ctx, t, tc, ns, rule, d)
			}})
			seen[rule]++
		}
	}
	runConcurrently(t, checks)
	for rule := range mishandledRules {
		if seen[rule] == 0 {
			t.Errorf("no document of the users' corpus shows %s", rule)
		}
	}
}

// concurrentCheck is a named check for runConcurrently.
type concurrentCheck struct {
	name string
	run  func(t testing.TB)
}

// runConcurrently runs the checks, concurrentChecks at a time, each in a
// goroutine of its own, then reports each as a subtest with what it
// logged and whether it failed. The checks mostly wait for the operator:
// as parallel subtests, -parallel (the number of CPUs) would run two at a
// time. More than concurrentChecks at once would back the operator up
// (it reconciles one object at a time), and a check that nothing happens
// within some seconds would prove less.
func runConcurrently(t *testing.T, checks []concurrentCheck) {
	recorders := make([]*checkRecorder, len(checks))
	slots := make(chan struct{}, concurrentChecks)
	var wg sync.WaitGroup
	for i, c := range checks {
		recorders[i] = &checkRecorder{TB: t}
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			defer func() {
				if r := recover(); r != nil {
					recorders[i].Errorf("panic: %v\n%s", r, debug.Stack())
				}
			}()
			c.run(recorders[i])
		})
	}
	wg.Wait()
	for i, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			r := recorders[i]
			for _, line := range r.lines {
				t.Log(line)
			}
			if r.failed {
				t.Fail()
			}
		})
	}
}

// concurrentChecks is how many checks runConcurrently runs at once.
const concurrentChecks = 8

// checkRecorder is the testing.TB of a check runConcurrently runs: it
// keeps what the check logs and whether it failed, and a fatal failure
// ends the check's goroutine. What a check may not do outside the test's
// goroutine (skip, clean up, change the environment) fails it.
type checkRecorder struct {
	testing.TB
	mu     sync.Mutex
	lines  []string
	failed bool
}

func (r *checkRecorder) Helper() {}

func (r *checkRecorder) record(failed bool, line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, line)
	r.failed = r.failed || failed
}

func (r *checkRecorder) Log(args ...any) { r.record(false, fmt.Sprint(args...)) }
func (r *checkRecorder) Logf(format string, args ...any) {
	r.record(false, fmt.Sprintf(format, args...))
}
func (r *checkRecorder) Error(args ...any) { r.record(true, fmt.Sprint(args...)) }
func (r *checkRecorder) Errorf(format string, args ...any) {
	r.record(true, fmt.Sprintf(format, args...))
}
func (r *checkRecorder) Fail() { r.record(true, "failed") }
func (r *checkRecorder) FailNow() {
	r.record(true, "failed")
	goruntime.Goexit()
}
func (r *checkRecorder) Fatal(args ...any) {
	r.record(true, fmt.Sprint(args...))
	goruntime.Goexit()
}
func (r *checkRecorder) Fatalf(format string, args ...any) {
	r.record(true, fmt.Sprintf(format, args...))
	goruntime.Goexit()
}
func (r *checkRecorder) unsupported(method string) {
	r.Fatalf("%s: not in a check of runConcurrently (it runs outside the test's goroutine)", method)
}

func (r *checkRecorder) Skip(...any)              { r.unsupported("Skip") }
func (r *checkRecorder) Skipf(string, ...any)     { r.unsupported("Skipf") }
func (r *checkRecorder) SkipNow()                 { r.unsupported("SkipNow") }
func (r *checkRecorder) Cleanup(func())           { r.unsupported("Cleanup") }
func (r *checkRecorder) Setenv(string, string)    { r.unsupported("Setenv") }
func (r *checkRecorder) Chdir(string)             { r.unsupported("Chdir") }
func (r *checkRecorder) TempDir() string          { r.unsupported("TempDir"); return "" }
func (r *checkRecorder) Context() context.Context { r.unsupported("Context"); return nil }

func (r *checkRecorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

// showMishandling creates d in ns and shows the operator doing what rule
// says it will.
func showMishandling(ctx context.Context, t testing.TB, tc *testcluster.Cluster, ns, rule string, d validation.Document) {
	name := d.Object.GetName()
	var want int32
	if d.Object.GetKind() == "RayCluster" {
		rc := &rayv1.RayCluster{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(d.Object.Object, rc); err != nil {
			t.Fatal(err)
		}
		for _, g := range rc.Spec.WorkerGroupSpecs {
			want += ptr.Deref(g.Replicas, 0)
		}
	}
	if rule == "workers-to-delete-foreign" {
		// Another workload's pod, of the name the RayCluster lists.
		foreign := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}}}
		if _, err := tc.Kube.CoreV1().Pods(ns).Create(ctx, foreign, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if rule == "autoscaler-service-account" {
		// The account the head template names, made as its docs ask.
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: headTemplateServiceAccount(t, d)}}
		if _, err := tc.Kube.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := createAsWritten(ctx, tc, ns, d, ""); err != nil {
		t.Fatalf("the API server refuses it, lint only warns of the operator: %v", err)
	}
	if rule == "operator-container-name" && d.Object.GetKind() == "RayJob" {
		rule = "cluster-refused" // SidecarMode's submitter beside the user's
	}
	switch rule {
	case "cluster-refused", "redis-credential", "head-service-refused", "nested-upgrade-strategy", "ingress-refused", "autoscaler-service-account":
		// The event the refusal leaves, and no pod after it.
		reason := map[string]string{"cluster-refused": "FailedToCreateRayCluster", "redis-credential": "FailedToCreateHeadPod",
			"head-service-refused": "FailedToCreateService", "nested-upgrade-strategy": "InvalidRayClusterSpec",
			"ingress-refused": "FailedToCreateIngress", "autoscaler-service-account": "FailedToCreateHeadPod"}[rule]
		events := waitForEvent(ctx, t, tc, ns, reason)
		time.Sleep(5 * time.Second)
		if pods := podsIn(ctx, t, tc, ns); pods != 0 {
			t.Errorf("%d pods after %s; lint says the operator creates none", pods, events)
		}
	case "submitter-refused":
		events := waitForEvent(ctx, t, tc, ns, "FailedToCreateRayJobSubmitter")
		if jobs, err := tc.Kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{}); err != nil || len(jobs.Items) != 0 {
			t.Errorf("%d submitter Jobs (%v) after %s; lint says the API server refuses it", len(jobs.Items), err, events)
		}
	case "entrypoint-resources", "entrypoint-missing":
		var args string
		waitFor(ctx, t, "the submitter Job", func() bool {
			job, err := tc.Kube.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
			if err == nil {
				c := job.Spec.Template.Spec.Containers[0]
				args = strings.Join(strings.Fields(strings.Join(slices.Concat(c.Command, c.Args), " ")), " ") // the shell's words
			}
			return err == nil
		})
		want := "-- ;"
		if rule == "entrypoint-resources" {
			r, _, _ := unstructured.NestedString(d.Object.Object, "spec", "entrypointResources")
			want = "--entrypoint-resources " + strconv.Quote(r) + " "
		}
		if !strings.Contains(args, want) {
			t.Errorf("the submitter runs %s; lint says it runs %q", args, want)
		}
	case "originated-from-crd-label":
		settledWorkers(ctx, t, tc, ns)
		if serve, ok := headPod(ctx, t, tc, ns).Labels["ray.io/serve"]; !ok || serve != "false" {
			t.Errorf("the head's ray.io/serve label %q (set: %v); lint says the head is built as a RayService's", serve, ok)
		}
	case "redis-address-missing":
		settledWorkers(ctx, t, tc, ns)
		if addr, ok := envOf(headPod(ctx, t, tc, ns))["RAY_REDIS_ADDRESS"]; !ok || addr != "" {
			t.Errorf("the head has RAY_REDIS_ADDRESS %q (set: %v); lint says it is given an empty one", addr, ok)
		}
	case "service-field-ignored":
		var svc *corev1.Service
		waitFor(ctx, t, "the head Service", func() bool {
			list, err := tc.Kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{LabelSelector: "ray.io/node-type=head"})
			if err == nil && len(list.Items) == 1 {
				svc = &list.Items[0]
			}
			return svc != nil
		})
		if svc.Spec.Selector["app"] != "" || svc.Spec.Selector["ray.io/cluster"] != name {
			t.Errorf("the head Service selects %v; lint says the operator's selector replaces the one written", svc.Spec.Selector)
		}
	case "fault-tolerance-ignored":
		settledWorkers(ctx, t, tc, ns)
		env := envOf(headPod(ctx, t, tc, ns))
		_, storage := env["RAY_external_storage_namespace"]
		_, redis := env["RAY_REDIS_ADDRESS"]
		if d.Object.GetAnnotations()["ray.io/ft-enabled"] == "" {
			if storage {
				t.Errorf("the head has RAY_external_storage_namespace; lint says the annotation is ignored")
			}
			break
		}
		rc, err := tc.Ray.RayV1().RayClusters(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || !storage || redis || !slices.Contains(rc.Finalizers, "ray.io/gcs-ft-redis-cleanup-finalizer") {
			t.Errorf("storage namespace %v, Redis address %v, finalizers %v (%v); lint says fault tolerance is set up with no Redis", storage, redis, rc.Finalizers, err)
		}
	case "head-service-selects-nothing":
		settledWorkers(ctx, t, tc, ns)
		head := headPod(ctx, t, tc, ns)
		svc, err := tc.Kube.CoreV1().Services(ns).Get(ctx, name+"-head-svc", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		selected, err := tc.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(svc.Spec.Selector).String()})
		if err != nil || len(selected.Items) != 0 {
			t.Errorf("the head Service selects %d pods (%v); lint says none, though the head pod %s runs", len(selected.Items), err, head.Name)
		}
	case "dashboard-port-missing", "submit-command":
		waitFor(ctx, t, "the RayJob's cluster to be ready", func() bool {
			list, err := tc.Ray.RayV1().RayClusters(ns).List(ctx, metav1.ListOptions{})
			//lint:ignore SA1019 status.state is what the RayJob controller waits for
			return err == nil && len(list.Items) == 1 && list.Items[0].Status.State == rayv1.Ready
		})
		time.Sleep(10 * time.Second)
		job, err := tc.Ray.RayV1().RayJobs(ns).Get(ctx, name, metav1.GetOptions{})
		if rule == "submit-command" {
			jobs, listErr := tc.Kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
			if err != nil || listErr != nil || job.Status.JobDeploymentStatus != rayv1.JobDeploymentStatusInitializing || len(jobs.Items) != 0 {
				t.Errorf("job %s, %d submitter Jobs (%v, %v); lint says the operator cannot build the submitter", job.Status.JobDeploymentStatus, len(jobs.Items), err, listErr)
			}
			break
		}
		if err != nil || job.Status.JobDeploymentStatus != rayv1.JobDeploymentStatusInitializing || job.Status.DashboardURL != "" {
			t.Errorf("job %s, dashboard %q (%v); lint says the operator waits for a dashboard port without end", job.Status.JobDeploymentStatus, job.Status.DashboardURL, err)
		}
	case "group-name-label", "operator-container-name":
		workers, events := settledWorkers(ctx, t, tc, ns)
		if workers != 0 || !strings.Contains(events, "FailedToCreateWorkerPod") {
			t.Errorf("%d worker pods, warning events %.300s; lint says the API server refuses every worker pod", workers, events)
		}
	case "duplicate-group-name":
		if workers, _ := settledWorkers(ctx, t, tc, ns); workers >= want {
			t.Errorf("%d worker pods for %d replicas; lint says the groups share their pods", workers, want)
		}
	case "num-of-hosts":
		if workers, _ := settledWorkers(ctx, t, tc, ns); workers != 0 || want == 0 {
			t.Errorf("%d worker pods for %d replicas; lint says the group gets none", workers, want)
		}
	case "workers-to-delete-name":
		workers, events := settledWorkers(ctx, t, tc, ns)
		if workers != 0 || !strings.Contains(events, "FailedToDeleteWorkerPod") {
			t.Errorf("%d worker pods, warning events %.300s; lint says the delete fails at every reconcile and no worker is created", workers, events)
		}
	case "serve-port-missing":
		waitFor(ctx, t, "the head Service", func() bool {
			_, err := tc.Kube.CoreV1().Services(ns).Get(ctx, name+"-head-svc", metav1.GetOptions{})
			return err == nil
		})
		time.Sleep(10 * time.Second)
		if pods := podsIn(ctx, t, tc, ns); pods != 0 {
			t.Errorf("%d pods; lint says the operator stops at the serve Service, before any pod", pods)
		}
	case "nested-cluster-suspended":
		waitFor(ctx, t, "the RayJob's RayCluster", func() bool {
			list, err := tc.Ray.RayV1().RayClusters(ns).List(ctx, metav1.ListOptions{})
			return err == nil && len(list.Items) > 0
		})
		time.Sleep(10 * time.Second)
		job, err := tc.Ray.RayV1().RayJobs(ns).Get(ctx, name, metav1.GetOptions{})
		if pods := podsIn(ctx, t, tc, ns); err != nil || pods != 0 || job.Status.JobDeploymentStatus == rayv1.JobDeploymentStatusRunning {
			t.Errorf("%d pods, job %v (%v); lint says the cluster gets none and the job waits", pods, job.Status.JobDeploymentStatus, err)
		}
	case "auth-mode-unset":
		settledWorkers(ctx, t, tc, ns)
		head := headPod(ctx, t, tc, ns)
		if env := envOf(head); env["RAY_AUTH_MODE"] != "" || env["RAY_AUTH_TOKEN"] != "" {
			t.Errorf("the head has RAY_AUTH_MODE=%q; lint says auth is off", env["RAY_AUTH_MODE"])
		}
		if _, err := tc.Kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("no token Secret (%v): the operator did not read authOptions as asking for auth", err)
		}
	case "group-resource-quantity":
		settledWorkers(ctx, t, tc, ns)
		pods, err := tc.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "ray.io/node-type=worker"})
		if err != nil || len(pods.Items) == 0 {
			t.Fatalf("no worker pod: %v", err)
		}
		cmd := envOf(&pods.Items[0])["KUBERAY_GEN_RAY_START_CMD"]
		if cmd == "" || strings.Contains(cmd, "accelerator") {
			t.Errorf("the worker's ray start command %q; lint says the resource is dropped", cmd)
		}
	case "submission-mode":
		// The same RayJob in the default mode, for contrast: it gets its
		// submitter once its cluster is ready.
		baseline := ns + "-k8sjob"
		if err := tc.CreateNamespace(ctx, baseline); err != nil {
			t.Fatal(err)
		}
		if err := createAsWritten(ctx, tc, baseline, d, rayv1.K8sJobMode); err != nil {
			t.Fatal(err)
		}
		for _, where := range []string{ns, baseline} {
			waitFor(ctx, t, where+"'s RayJob to be Running", func() bool {
				job, err := tc.Ray.RayV1().RayJobs(where).Get(ctx, name, metav1.GetOptions{})
				return err == nil && job.Status.JobDeploymentStatus == rayv1.JobDeploymentStatusRunning
			})
		}
		time.Sleep(5 * time.Second)
		if jobs, err := tc.Kube.BatchV1().Jobs(baseline).List(ctx, metav1.ListOptions{}); err != nil || len(jobs.Items) == 0 {
			t.Fatalf("in K8sJobMode the RayJob has no submitter Job either (%v): the contrast shows nothing", err)
		}
		if jobs, err := tc.Kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{}); err != nil || len(jobs.Items) != 0 {
			t.Errorf("%d submitter Jobs (%v); lint says nothing submits the job", len(jobs.Items), err)
		}
	case "ray-container-first":
		settledWorkers(ctx, t, tc, ns)
		head := headPod(ctx, t, tc, ns)
		if first := head.Spec.Containers[0]; first.Image == "" || strings.HasPrefix(first.Image, "rayproject/ray") || envOf(head)["KUBERAY_GEN_RAY_START_CMD"] == "" {
			t.Errorf("the head's first container %s (%s) is not given ray start; lint says the sidecar is", first.Name, first.Image)
		}
	case "operator-env-overrides":
		if d.Object.GetKind() == "RayJob" {
			var env []corev1.EnvVar
			waitFor(ctx, t, "the submitter Job", func() bool {
				job, err := tc.Kube.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
				if err == nil {
					env = job.Spec.Template.Spec.Containers[0].Env
				}
				return err == nil
			})
			var values []string
			for _, e := range env {
				if e.Name == "RAY_DASHBOARD_ADDRESS" {
					values = append(values, e.Value)
				}
			}
			if n := len(values); n < 2 || values[n-1] == values[0] {
				t.Errorf("the submitter's RAY_DASHBOARD_ADDRESS %v; lint says the operator's comes after the user's", values)
			}
			break
		}
		settledWorkers(ctx, t, tc, ns)
		var entries []corev1.EnvVar
		for _, e := range headPod(ctx, t, tc, ns).Spec.Containers[0].Env {
			if e.Name == "RAY_CLUSTER_NAME" {
				entries = append(entries, e)
			}
		}
		// The operator's reads the pod's ray.io/cluster label.
		if n := len(entries); n < 2 || entries[n-1].ValueFrom == nil || entries[n-1].ValueFrom.FieldRef == nil {
			t.Errorf("RAY_CLUSTER_NAME %v; lint says the operator's comes after the user's", entries)
		}
	case "annotation-bool":
		settledWorkers(ctx, t, tc, ns)
		if _, err := tc.Kube.CoreV1().Services(ns).Get(ctx, name+"-serve-svc", metav1.GetOptions{}); err == nil {
			t.Errorf("a serve Service exists; lint says the annotation reads as false")
		}
	case "autoscaler-options-ignored":
		settledWorkers(ctx, t, tc, ns)
		for _, c := range headPod(ctx, t, tc, ns).Spec.Containers {
			if c.Name == "autoscaler" {
				t.Errorf("the head has an autoscaler container; lint says the options are ignored")
			}
		}
	case "workers-to-delete-foreign":
		waitFor(ctx, t, "the operator to delete pod web-0", func() bool {
			_, err := tc.Kube.CoreV1().Pods(ns).Get(ctx, "web-0", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		})
	case "rayjob-field-ignored":
		waitFor(ctx, t, "the operator to act on the RayJob", func() bool {
			job, err := tc.Ray.RayV1().RayJobs(ns).Get(ctx, name, metav1.GetOptions{})
			return err == nil && job.Status.JobDeploymentStatus != ""
		})
		time.Sleep(10 * time.Second)
		if list, err := tc.Ray.RayV1().RayClusters(ns).List(ctx, metav1.ListOptions{}); err != nil || len(list.Items) != 0 {
			t.Errorf("RayClusters %v (%v); lint says rayClusterSpec is ignored", list, err)
		}
	default:
		t.Fatalf("no way to show %s", rule)
	}
}

// headTemplateServiceAccount is the serviceAccountName of a RayCluster's
// head template.
func headTemplateServiceAccount(t testing.TB, d validation.Document) string {
	sa, _, err := unstructured.NestedString(d.Object.Object, "spec", "headGroupSpec", "template", "spec", "serviceAccountName")
	if err != nil || sa == "" {
		t.Fatalf("no serviceAccountName in the head template: %v", err)
	}
	return sa
}

// createAsWritten creates d's object in ns as kubectl would, its fields as
// written (a typed client would leave out a zero numOfHosts, and the API
// server would default it); a RayJob in submission mode mode when that is
// not "".
func createAsWritten(ctx context.Context, tc *testcluster.Cluster, ns string, d validation.Document, mode rayv1.JobSubmissionMode) error {
	obj := d.Object.DeepCopy()
	obj.SetNamespace(ns)
	if mode != "" {
		if err := unstructured.SetNestedField(obj.Object, string(mode), "spec", "submissionMode"); err != nil {
			return err
		}
	}
	gvr := rayv1.GroupVersion.WithResource(strings.ToLower(obj.GetKind()) + "s")
	_, err := tc.Dynamic.Resource(gvr).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{})
	return err
}

// waitFor polls until done, failing the test when ctx ends first.
func waitFor(ctx context.Context, t testing.TB, what string, done func() bool) {
	t.Helper()
	for !done() {
		if ctx.Err() != nil {
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		}
		time.Sleep(time.Second)
	}
}

// waitForEvent waits for a warning event of reason in ns; it returns the
// warning events.
func waitForEvent(ctx context.Context, t testing.TB, tc *testcluster.Cluster, ns, reason string) string {
	t.Helper()
	var summary string
	waitFor(ctx, t, "a "+reason+" event", func() bool {
		summary = warningEvents(ctx, t, tc, ns)
		return strings.Contains(summary, "["+reason+":")
	})
	return summary
}

func podsIn(ctx context.Context, t testing.TB, tc *testcluster.Cluster, ns string) int {
	pods, err := tc.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return len(pods.Items)
}

func headPod(ctx context.Context, t testing.TB, tc *testcluster.Cluster, ns string) *corev1.Pod {
	pods, err := tc.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "ray.io/node-type=head"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("the head pod: %v", err)
	}
	return &pods.Items[0]
}

// envOf is the env of a pod's first container, by name.
func envOf(p *corev1.Pod) map[string]string {
	env := map[string]string{}
	for _, e := range p.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	return env
}

// settledWorkers waits until the operator has acted on a namespace's
// RayCluster (the head pod exists) and the number of worker pods has not
// changed for ten seconds; it returns that number and the warning events.
func settledWorkers(ctx context.Context, t testing.TB, tc *testcluster.Cluster, ns string) (int32, string) {
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
	return last, warningEvents(ctx, t, tc, ns)
}

// warningEvents lists a namespace's warning events as [reason: message].
func warningEvents(ctx context.Context, t testing.TB, tc *testcluster.Cluster, ns string) string {
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
	return b.String()
}

var operatorRuleIDs = map[string]bool{
	"group-name-label": true, "duplicate-group-name": true, "ray-container-first": true, "ray-start-param": true,
	"head-service-refused": true, "serve-port-missing": true, "num-of-hosts": true, "operator-container-name": true,
	"workers-to-delete-name": true, "workers-to-delete-foreign": true, "auth-mode-unset": true,
	"group-resource-quantity": true, "operator-env-overrides": true, "annotation-bool": true,
	"autoscaler-options-ignored": true, "nested-upgrade-strategy": true, "nested-cluster-suspended": true,
	"submission-mode": true, "rayjob-field-ignored": true, "redis-credential": true, "dashboard-port-missing": true,
	"head-service-selects-nothing": true, "ingress-refused": true, "autoscaler-service-account": true,
	"submitter-refused": true, "submit-command": true, "entrypoint-resources": true, "entrypoint-missing": true,
	"fault-tolerance-ignored": true, "redis-address-missing": true, "service-field-ignored": true,
	"gang-scheduling-label": true, "originated-from-crd-label": true,
}

// TestOperatorRulesFindings: which cluster specs each operator rule finds
// (and that the same spec written right finds nothing).
func TestOperatorRulesFindings(t *testing.T) {
	base := rayClusterDoc("rules")
	group := func(name string) string {
		return strings.Replace(base, "groupName: gpu", "groupName: "+name, 1)
	}
	// annotated, labelled: base with metadata written after its name;
	// headed: with a field of headGroupSpec; headLabels: with the head
	// template's labels; clusterField: with a field of the spec;
	// autoscaled: with autoscaling and the head's service account.
	annotated := func(yaml string) string {
		return strings.Replace(base, "  name: rules\n", "  name: rules\n  "+yaml+"\n", 1)
	}
	headed := func(doc, yaml string) string {
		return strings.Replace(doc, "  headGroupSpec:\n", "  headGroupSpec:\n    "+yaml+"\n", 1)
	}
	headLabels := func(yaml string) string {
		return strings.Replace(base, "    template:\n      spec:\n        containers:\n        - name: ray-head\n", "    template:\n      metadata: {labels: "+yaml+"}\n      spec:\n        containers:\n        - name: ray-head\n", 1)
	}
	clusterField := func(doc, yaml string) string {
		return strings.Replace(doc, "  headGroupSpec:\n", "  "+yaml+"\n  headGroupSpec:\n", 1)
	}
	withHeadEnv := func(doc, yaml string) string {
		return strings.Replace(doc, "          image: rayproject/ray:2.54.0\n  workerGroupSpecs", "          image: rayproject/ray:2.54.0\n          env: "+yaml+"\n  workerGroupSpecs", 1)
	}
	autoscaled := func(account string) string {
		doc := clusterField(base, "enableInTreeAutoscaling: true\n  autoscalerOptions: {version: v2}")
		return strings.Replace(doc, "      spec:\n        containers:\n        - name: ray-head\n", "      spec:\n        serviceAccountName: "+account+"\n        containers:\n        - name: ray-head\n", 1)
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
		{"a head Service type in lower case", strings.Replace(base, "  headGroupSpec:\n", "  headGroupSpec:\n    serviceType: clusterip\n", 1), "head-service-refused", "spec.headGroupSpec.serviceType"},
		{"NodePort", strings.Replace(base, "  headGroupSpec:\n", "  headGroupSpec:\n    serviceType: NodePort\n", 1), "", ""},
		{"a head port on 8080", strings.Replace(base, "        - name: ray-head\n          image: rayproject/ray:2.54.0\n", "        - name: ray-head\n          image: rayproject/ray:2.54.0\n          ports: [{name: web, containerPort: 8080}]\n", 1), "head-service-refused", "spec.headGroupSpec.template.spec.containers[0].ports"},
		{"metrics on 8080", strings.Replace(base, "        - name: ray-head\n          image: rayproject/ray:2.54.0\n", "        - name: ray-head\n          image: rayproject/ray:2.54.0\n          ports: [{name: metrics, containerPort: 8080}]\n", 1), "", ""},
		{"a headService name with capitals", strings.Replace(base, "  headGroupSpec:\n", "  headGroupSpec:\n    headService: {metadata: {name: Head}}\n", 1), "head-service-refused", "spec.headGroupSpec.headService.metadata"},
		{"a headService name", strings.Replace(base, "  headGroupSpec:\n", "  headGroupSpec:\n    headService: {metadata: {name: head}}\n", 1), "", ""},
		{"a serve Service without a serve port", strings.Replace(strings.Replace(base, "  name: rules\n", "  name: rules\n  annotations: {ray.io/enable-serve-service: \"true\"}\n", 1), "        - name: ray-head\n          image: rayproject/ray:2.54.0\n", "        - name: ray-head\n          image: rayproject/ray:2.54.0\n          ports: [{name: gcs, containerPort: 6379}]\n", 1), "serve-port-missing", "spec.headGroupSpec.template.spec.containers[0].ports"},
		{"a serve Service on the default ports", strings.Replace(base, "  name: rules\n", "  name: rules\n  annotations: {ray.io/enable-serve-service: \"true\"}\n", 1), "", ""},
		{"zero hosts", strings.Replace(base, "    replicas: 1\n", "    replicas: 1\n    numOfHosts: 0\n", 1), "num-of-hosts", "spec.workerGroupSpecs[0].numOfHosts"},
		{"four hosts", strings.Replace(base, "    replicas: 1\n", "    replicas: 1\n    numOfHosts: 4\n", 1), "", ""},
		{"an own autoscaler container", strings.Replace(strings.Replace(base, "  headGroupSpec:\n", "  enableInTreeAutoscaling: true\n  autoscalerOptions: {version: v2}\n  headGroupSpec:\n", 1), "        - name: ray-head\n          image: rayproject/ray:2.54.0\n", "        - name: ray-head\n          image: rayproject/ray:2.54.0\n        - name: autoscaler\n          image: rayproject/ray:2.54.0\n", 1), "operator-container-name", "spec.headGroupSpec.template.spec.containers[1].name"},
		{"a pod to delete by namespace/name", strings.Replace(base, "    replicas: 1\n", "    replicas: 1\n    scaleStrategy: {workersToDelete: [default/rules-gpu-worker-abcde]}\n", 1), "workers-to-delete-name", "spec.workerGroupSpecs[0].scaleStrategy.workersToDelete[0]"},
		{"a pod of the group to delete", strings.Replace(base, "    replicas: 1\n", "    replicas: 1\n    scaleStrategy: {workersToDelete: [rules-gpu-worker-abcde]}\n", 1), "", ""},
		{"the head pod to delete", strings.Replace(base, "    replicas: 1\n", "    replicas: 1\n    scaleStrategy: {workersToDelete: [rules-head-abcde]}\n", 1), "workers-to-delete-foreign", "spec.workerGroupSpecs[0].scaleStrategy.workersToDelete[0]"},
		{"auth without a mode", strings.Replace(base, "  headGroupSpec:\n", "  authOptions: {}\n  headGroupSpec:\n", 1), "auth-mode-unset", "spec.authOptions.mode"},
		{"token auth", strings.Replace(base, "  headGroupSpec:\n", "  authOptions: {mode: token}\n  headGroupSpec:\n", 1), "", ""},
		{"a resource in words", strings.Replace(base, "    replicas: 1\n", "    replicas: 1\n    resources: {GPU: one}\n", 1), "group-resource-quantity", "spec.workerGroupSpecs[0].resources.GPU"},
		{"a resource as a quantity", strings.Replace(base, "    replicas: 1\n", "    replicas: 1\n    resources: {TPU: \"4\"}\n", 1), "", ""},
		{"the operator's env set too", strings.Replace(base, "          image: rayproject/ray:2.54.0\n  workerGroupSpecs", "          image: rayproject/ray:2.54.0\n          env: [{name: RAY_CLUSTER_NAME, value: mine}]\n  workerGroupSpecs", 1), "operator-env-overrides", "spec.headGroupSpec.template.spec.containers[0].env"},
		{"an env the operator leaves alone", strings.Replace(base, "          image: rayproject/ray:2.54.0\n  workerGroupSpecs", "          image: rayproject/ray:2.54.0\n          env: [{name: RAY_ADDRESS, value: auto}]\n  workerGroupSpecs", 1), "", ""},
		{"a Redis password given twice", strings.Replace(base, "  headGroupSpec:\n", "  gcsFaultToleranceOptions:\n    redisAddress: redis:6379\n    redisPassword: {value: x, valueFrom: {secretKeyRef: {name: redis, key: password}}}\n  headGroupSpec:\n", 1), "redis-credential", "spec.gcsFaultToleranceOptions.redisPassword"},
		{"a Redis password from a Secret", strings.Replace(base, "  headGroupSpec:\n", "  gcsFaultToleranceOptions:\n    redisAddress: redis:6379\n    redisPassword: {valueFrom: {secretKeyRef: {name: redis, key: password}}}\n  headGroupSpec:\n", 1), "", ""},
		{"a head Service label value with a space", strings.Replace(base, "  headGroupSpec:\n", "  headGroupSpec:\n    headService: {metadata: {labels: {team: ML Platform}}}\n", 1), "head-service-refused", "spec.headGroupSpec.headService.metadata"},
		{"a RayCluster's head ports without the dashboard", strings.Replace(base, "        - name: ray-head\n          image: rayproject/ray:2.54.0\n", "        - name: ray-head\n          image: rayproject/ray:2.54.0\n          ports: [{name: gcs, containerPort: 6379}]\n", 1), "", ""},
		{"the serve Service asked for in capitals", strings.Replace(base, "  name: rules\n", "  name: rules\n  annotations: {ray.io/enable-serve-service: \"True\"}\n", 1), "annotation-bool", "metadata.annotations.ray.io/enable-serve-service"},
		{"only the autoscaler's version without autoscaling", strings.Replace(base, "  headGroupSpec:\n", "  autoscalerOptions: {version: v2}\n  headGroupSpec:\n", 1), "", ""},
		{"the operator's created-by label on the head", headLabels("{app.kubernetes.io/created-by: me}"), "head-service-selects-nothing", "spec.headGroupSpec.template.metadata.labels.app.kubernetes.io/created-by"},
		{"the operator's identifier label on the head", headLabels("{ray.io/identifier: head}"), "head-service-selects-nothing", "spec.headGroupSpec.template.metadata.labels.ray.io/identifier"},
		{"the head's identifier label as the operator sets it", headLabels("{ray.io/identifier: rules-head}"), "", ""},
		{"the app's name label on the head (carried to the Service)", headLabels("{app.kubernetes.io/name: trainer, ray.io/cluster: other}"), "", ""},
		{"the operator's created-by label in the head group's labels", headed(base, "labels: {app.kubernetes.io/created-by: me}"), "head-service-selects-nothing", "spec.headGroupSpec.labels.app.kubernetes.io/created-by"},
		{"the app's name label in the head group's labels (not carried)", headed(base, "labels: {app.kubernetes.io/name: trainer}"), "head-service-selects-nothing", "spec.headGroupSpec.labels.app.kubernetes.io/name"},
		{"the operator's created-by label on a worker", strings.Replace(base, "    replicas: 1\n", "    replicas: 1\n    template:\n      metadata: {labels: {app.kubernetes.io/created-by: me}}\n", 1), "", ""},
		{"an ingress class with an underscore", headed(annotated("annotations: {kubernetes.io/ingress.class: nginx_internal}"), "enableIngress: true"), "ingress-refused", "metadata.annotations.kubernetes.io/ingress.class"},
		{"an ingress class", headed(annotated("annotations: {kubernetes.io/ingress.class: nginx-internal}"), "enableIngress: true"), "", ""},
		{"an ingress class with an underscore, no ingress", annotated("annotations: {kubernetes.io/ingress.class: nginx_internal}"), "", ""},
		{"a long service account with autoscaling", autoscaled(strings.Repeat("a", 51)), "autoscaler-service-account", "spec.headGroupSpec.template.spec.serviceAccountName"},
		{"a service account beginning with a digit, with autoscaling", autoscaled("1-ray"), "autoscaler-service-account", "spec.headGroupSpec.template.spec.serviceAccountName"},
		{"a service account of 50 characters, with autoscaling", autoscaled(strings.Repeat("a", 50)), "", ""},
		{"a long service account without autoscaling", strings.Replace(base, "      spec:\n        containers:\n        - name: ray-head\n", "      spec:\n        serviceAccountName: "+strings.Repeat("a", 51)+"\n        containers:\n        - name: ray-head\n", 1), "", ""},
		{"ft-enabled without Redis", annotated(`annotations: {ray.io/ft-enabled: "true"}`), "fault-tolerance-ignored", "metadata.annotations.ray.io/ft-enabled"},
		{"ft-enabled with RAY_REDIS_ADDRESS", withHeadEnv(annotated(`annotations: {ray.io/ft-enabled: "true"}`), "[{name: RAY_REDIS_ADDRESS, value: redis:6379}]"), "", ""},
		{"ft-enabled with Redis as the head's address", strings.Replace(annotated(`annotations: {ray.io/ft-enabled: "true"}`), "    rayStartParams: {}\n    template:\n      spec:\n        containers:\n        - name: ray-head\n", "    rayStartParams: {address: \"redis:6379\"}\n    template:\n      spec:\n        containers:\n        - name: ray-head\n", 1), "", ""},
		{"gcsFaultToleranceOptions", clusterField(base, "gcsFaultToleranceOptions: {redisAddress: redis:6379}"), "", ""},
		{"a storage namespace without fault tolerance", annotated("annotations: {ray.io/external-storage-namespace: ns}"), "fault-tolerance-ignored", "metadata.annotations.ray.io/external-storage-namespace"},
		{"a storage namespace with ft-enabled", withHeadEnv(annotated(`annotations: {ray.io/ft-enabled: "true", ray.io/external-storage-namespace: ns}`), "[{name: RAY_REDIS_ADDRESS, value: redis:6379}]"), "", ""},
		{"fault tolerance without a Redis address", clusterField(base, `gcsFaultToleranceOptions: {redisAddress: ""}`), "redis-address-missing", "spec.gcsFaultToleranceOptions.redisAddress"},
		{"an empty Redis address beside the head's address", strings.Replace(clusterField(base, `gcsFaultToleranceOptions: {redisAddress: ""}`), "    rayStartParams: {}\n    template:\n      spec:\n        containers:\n        - name: ray-head\n", "    rayStartParams: {address: \"redis:6379\"}\n    template:\n      spec:\n        containers:\n        - name: ray-head\n", 1), "", ""},
		{"a head Service selector", headed(base, "headService: {spec: {selector: {app: x}}}"), "service-field-ignored", "spec.headGroupSpec.headService.spec.selector"},
		{"a head Service namespace", headed(annotated("namespace: prod"), "headService: {metadata: {namespace: other}}"), "service-field-ignored", "spec.headGroupSpec.headService.metadata.namespace"},
		{"a head Service namespace, the cluster's", headed(annotated("namespace: prod"), "headService: {metadata: {namespace: prod}}"), "", ""},
		{"a head Service namespace, the cluster's not written", headed(base, "headService: {metadata: {namespace: prod}}"), "", ""},
		{"a head Service annotation", headed(base, "headService: {metadata: {annotations: {a: b}}}"), "", ""},
		{"labelled as a RayService's cluster", annotated("labels: {ray.io/originated-from-crd: RayService}"), "originated-from-crd-label", "metadata.labels.ray.io/originated-from-crd"},
		{"labelled as a RayJob's cluster", annotated("labels: {ray.io/originated-from-crd: RayJob}"), "originated-from-crd-label", "metadata.labels.ray.io/originated-from-crd"},
		{"labelled as a RayCluster's own", annotated("labels: {ray.io/originated-from-crd: RayCluster}"), "", ""},
		{"autoscaler options without autoscaling", strings.Replace(base, "  headGroupSpec:\n", "  autoscalerOptions: {idleTimeoutSeconds: 60}\n  headGroupSpec:\n", 1), "autoscaler-options-ignored", "spec.autoscalerOptions"},
	} {
		t.Run(c.name, func(t *testing.T) { wantOperatorFinding(t, c.doc, c.id, c.path) })
	}
}

// TestRayJobRulesFindings: which RayJobs the operator rules on RayJobs
// find.
func TestRayJobRulesFindings(t *testing.T) {
	const job = `apiVersion: ray.io/v1
kind: RayJob
metadata: {name: job}
spec:
  entrypoint: python x.py
  shutdownAfterJobFinishes: true
  rayClusterSpec:
    headGroupSpec:
      rayStartParams: {}
      template:
        spec:
          containers: [{name: ray-head, image: rayproject/ray:2.54.0}]
`
	cluster := func(field string) string {
		return strings.Replace(job, "    headGroupSpec:\n", "    "+field+"\n    headGroupSpec:\n", 1)
	}
	spec := func(field string) string {
		return strings.Replace(job, "  entrypoint: python x.py\n", "  entrypoint: python x.py\n  "+field+"\n", 1)
	}
	for _, c := range []struct {
		name, doc, id, path string
	}{
		{"as written", job, "", ""},
		{"an upgrade strategy for its cluster", cluster("upgradeStrategy: {type: Recreate}"), "nested-upgrade-strategy", "spec.rayClusterSpec.upgradeStrategy.type"},
		{"its cluster suspended", cluster("suspend: true"), "nested-cluster-suspended", "spec.rayClusterSpec.suspend"},
		{"the job suspended", spec("suspend: true"), "", ""},
		{"an unknown submission mode", spec("submissionMode: K8sJob"), "submission-mode", "spec.submissionMode"},
		{"SidecarMode", spec("submissionMode: SidecarMode"), "", ""},
		{"zero hosts (a typed client leaves it out: the default applies)", cluster("workerGroupSpecs: [{groupName: g, replicas: 1, numOfHosts: 0, rayStartParams: {}, template: {spec: {containers: [{name: w, image: rayproject/ray:2.54.0}]}}}]"), "", ""},
		{"negative hosts", cluster("workerGroupSpecs: [{groupName: g, replicas: 1, numOfHosts: -1, rayStartParams: {}, template: {spec: {containers: [{name: w, image: rayproject/ray:2.54.0}]}}}]"), "num-of-hosts", "spec.rayClusterSpec.workerGroupSpecs[0].numOfHosts"},
		{"a pod of its cluster to delete", cluster("workerGroupSpecs: [{groupName: g, replicas: 1, scaleStrategy: {workersToDelete: [job-x7k2p-g-worker-abcde]}, rayStartParams: {}, template: {spec: {containers: [{name: w, image: rayproject/ray:2.54.0}]}}}]"), "", ""},
		{"a cluster selector beside a suspended cluster", strings.Replace(job, "  rayClusterSpec:\n", "  clusterSelector: {ray.io/cluster: c}\n  rayClusterSpec:\n    suspend: true\n", 1), "rayjob-field-ignored", "spec.rayClusterSpec"},
		{"head ports without the dashboard", strings.Replace(job, "          containers: [{name: ray-head, image: rayproject/ray:2.54.0}]", "          containers: [{name: ray-head, image: rayproject/ray:2.54.0, ports: [{name: gcs, containerPort: 6379}]}]", 1), "dashboard-port-missing", "spec.rayClusterSpec.headGroupSpec.template.spec.containers[0].ports"},
		{"head ports with the dashboard", strings.Replace(job, "          containers: [{name: ray-head, image: rayproject/ray:2.54.0}]", "          containers: [{name: ray-head, image: rayproject/ray:2.54.0, ports: [{name: dashboard, containerPort: 8265}]}]", 1), "", ""},
		{"an own submitter in SidecarMode", strings.Replace(spec("submissionMode: SidecarMode"), "[{name: ray-head, image: rayproject/ray:2.54.0}]", "[{name: ray-head, image: rayproject/ray:2.54.0}, {name: ray-job-submitter, image: rayproject/ray:2.54.0}]", 1), "operator-container-name", "spec.rayClusterSpec.headGroupSpec.template.spec.containers[1].name"},
		{"an own submitter in K8sJobMode", strings.Replace(job, "[{name: ray-head, image: rayproject/ray:2.54.0}]", "[{name: ray-head, image: rayproject/ray:2.54.0}, {name: ray-job-submitter, image: rayproject/ray:2.54.0}]", 1), "", ""},
		{"metadata without rayVersion", spec("metadata: {owner: alice}"), "submit-command", "spec.metadata"},
		{"metadata for Ray 2.5", strings.Replace(spec("metadata: {owner: alice}"), "    headGroupSpec:\n", "    rayVersion: 2.5.0\n    headGroupSpec:\n", 1), "submit-command", "spec.metadata"},
		{"metadata in SidecarMode without rayVersion", spec("metadata: {owner: alice}\n  submissionMode: SidecarMode"), "submit-command", "spec.metadata"},
		{"metadata for Ray 2.54", strings.Replace(spec("metadata: {owner: alice}"), "    headGroupSpec:\n", "    rayVersion: 2.54.0\n    headGroupSpec:\n", 1), "", ""},
		{"metadata in HTTPMode without rayVersion", spec("metadata: {owner: alice}\n  submissionMode: HTTPMode"), "", ""},
		{"a submitter template without restartPolicy", spec("submitterPodTemplate: {spec: {containers: [{name: s, image: rayproject/ray:2.54.0}]}}"), "submitter-refused", "spec.submitterPodTemplate.spec.restartPolicy"},
		{"a submitter template restarting Always", spec("submitterPodTemplate: {spec: {restartPolicy: Always, containers: [{name: s, image: rayproject/ray:2.54.0}]}}"), "submitter-refused", "spec.submitterPodTemplate.spec.restartPolicy"},
		{"a submitter template restarting Never", spec("submitterPodTemplate: {spec: {restartPolicy: Never, containers: [{name: s, image: rayproject/ray:2.54.0}]}}"), "", ""},
		{"a negative submitter backoffLimit", spec("submitterConfig: {backoffLimit: -1}"), "submitter-refused", "spec.submitterConfig.backoffLimit"},
		{"a submitter backoffLimit of 0", spec("submitterConfig: {backoffLimit: 0}"), "", ""},
		{"the submitter's dashboard address set", spec("submitterPodTemplate: {spec: {restartPolicy: Never, containers: [{name: s, image: rayproject/ray:2.54.0, env: [{name: RAY_DASHBOARD_ADDRESS, value: x}]}]}}"), "operator-env-overrides", "spec.submitterPodTemplate.spec.containers[0].env"},
		{"the submitter's auth mode with token auth (the operator keeps the user's)", strings.Replace(spec("submitterPodTemplate: {spec: {restartPolicy: Never, containers: [{name: s, image: rayproject/ray:2.54.0, env: [{name: RAY_AUTH_MODE, value: token}]}]}}"), "    headGroupSpec:\n", "    rayVersion: \"2.54.0\"\n    authOptions: {mode: token}\n    headGroupSpec:\n", 1), "", ""},
		{"the submitter's own env", spec("submitterPodTemplate: {spec: {restartPolicy: Never, containers: [{name: s, image: rayproject/ray:2.54.0, env: [{name: TEAM, value: x}]}]}}"), "", ""},
		{"entrypoint resources not JSON", spec(`entrypointResources: "{TPU: 4}"`), "entrypoint-resources", "spec.entrypointResources"},
		{"entrypoint resources as strings", spec(`entrypointResources: '{"TPU": "4"}'`), "entrypoint-resources", "spec.entrypointResources"},
		{"entrypoint resources in HTTPMode", spec("entrypointResources: \"TPU=4\"\n  submissionMode: HTTPMode"), "entrypoint-resources", "spec.entrypointResources"},
		{"entrypoint resources as JSON", spec(`entrypointResources: '{"TPU": 4}'`), "", ""},
		{"entrypoint resources beside a submitter's own command", spec("entrypointResources: \"{TPU: 4}\"\n  submitterPodTemplate: {spec: {restartPolicy: Never, containers: [{name: s, image: rayproject/ray:2.54.0, command: [python, submit.py]}]}}"), "", ""},
		{"the head's identifier label", strings.Replace(job, "      template:\n", "      template:\n        metadata: {labels: {ray.io/identifier: job-head}}\n", 1), "head-service-selects-nothing", "spec.rayClusterSpec.headGroupSpec.template.metadata.labels.ray.io/identifier"},
		{"the app's name label on the head (not carried to the RayJob's Service)", strings.Replace(job, "      template:\n", "      template:\n        metadata: {labels: {app.kubernetes.io/name: trainer}}\n", 1), "head-service-selects-nothing", "spec.rayClusterSpec.headGroupSpec.template.metadata.labels.app.kubernetes.io/name"},
		{"an ingress class with an underscore", strings.Replace(strings.Replace(job, "metadata: {name: job}\n", "metadata: {name: job, annotations: {kubernetes.io/ingress.class: nginx_internal}}\n", 1), "    headGroupSpec:\n", "    headGroupSpec:\n      enableIngress: true\n", 1), "ingress-refused", "metadata.annotations.kubernetes.io/ingress.class"},
		{"no entrypoint", strings.Replace(job, "  entrypoint: python x.py\n", "", 1), "entrypoint-missing", "spec.entrypoint"},
		{"a blank entrypoint in SidecarMode", strings.Replace(job, "  entrypoint: python x.py\n", "  entrypoint: \" \"\n  submissionMode: SidecarMode\n", 1), "entrypoint-missing", "spec.entrypoint"},
		{"no entrypoint in InteractiveMode", strings.Replace(job, "  entrypoint: python x.py\n", "  submissionMode: InteractiveMode\n", 1), "", ""},
		{"no entrypoint beside a submitter's own command", strings.Replace(job, "  entrypoint: python x.py\n", "  submitterPodTemplate: {spec: {restartPolicy: Never, containers: [{name: s, image: rayproject/ray:2.54.0, command: [ray, job, submit, --, python, x.py]}]}}\n", 1), "", ""},
		{"a submitter template in HTTPMode", spec("submissionMode: HTTPMode\n  submitterConfig: {backoffLimit: 2}"), "rayjob-field-ignored", "spec.submitterConfig"},
	} {
		t.Run(c.name, func(t *testing.T) { wantOperatorFinding(t, c.doc, c.id, c.path) })
	}
}

// wantOperatorFinding lints doc and wants, of the operator rules' findings,
// exactly one: id at path (id "": none).
func wantOperatorFinding(t *testing.T, doc, id, path string) {
	t.Helper()
	var got []validation.Finding
	for _, f := range lintString(t, doc) {
		if operatorRuleIDs[f.ID] {
			got = append(got, f)
		}
	}
	if id == "" {
		if len(got) > 0 {
			t.Fatalf("want nothing, got %v", got)
		}
		return
	}
	if len(got) != 1 || got[0].ID != id || got[0].Path != path {
		t.Fatalf("want %s at %s, got %v", id, path, got)
	}
}

// TestServePortRule: a serve Service without a serve port, for a
// RayService that gives none of its own, and not for one that does
// (KubeRay's BuildServeService uses it as it is).
func TestServePortRule(t *testing.T) {
	service := strings.Replace(rayServiceDoc, "[{name: ray-head, image: rayproject/ray:2.54.0}]",
		"[{name: ray-head, image: rayproject/ray:2.54.0, ports: [{name: gcs, containerPort: 6379}, {name: dashboard, containerPort: 8265}]}]", 1)
	own := strings.Replace(service, "  rayClusterConfig:\n", "  serveService:\n    spec:\n      ports: [{name: serve, port: 8000}]\n  rayClusterConfig:\n", 1)
	for _, c := range []struct {
		name, doc string
		want      bool
	}{{"no serve port", service, true}, {"its own serve Service", own, false}} {
		found := false
		for _, f := range lintString(t, c.doc) {
			found = found || f.ID == "serve-port-missing"
		}
		if found != c.want {
			t.Errorf("%s: serve-port-missing %v, want %v", c.name, found, c.want)
		}
	}
}

// TestRayJobSubmitCommandVerbatim: the operator does not check the
// entrypoint or its resources — its own command construction (KubeRay
// v1.6.0's BuildJobSubmitCommand) gives them to `ray job submit` as they
// are, so what Ray's CLI refuses (an entrypoint is required after "--";
// --entrypoint-resources is read as a JSON object of quantities) is only
// found when the submitter runs.
func TestRayJobSubmitCommandVerbatim(t *testing.T) {
	job := &rayv1.RayJob{
		Spec:   rayv1.RayJobSpec{EntrypointResources: "{TPU: 4}", RayClusterSpec: &rayv1.RayClusterSpec{}},
		Status: rayv1.RayJobStatus{DashboardURL: "head:8265", JobId: "id"},
	}
	cmd, err := common.BuildJobSubmitCommand(job, rayv1.K8sJobMode)
	if err != nil {
		t.Fatal(err)
	}
	shell := strings.Join(strings.Fields(strings.Join(cmd, " ")), " ") // the shell's words
	for _, want := range []string{`--entrypoint-resources "{TPU: 4}" -- ;`} {
		if !strings.Contains(shell, want) {
			t.Errorf("the operator's submit command %s lacks %s", shell, want)
		}
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

// TestGangSchedulingLabelByPresence: gang-scheduling-label held to
// KubeRay v1.6.0's own batch scheduler code (a batch scheduler is not part
// of the test control plane): YuniKorn's gives a RayCluster's pods its
// task groups — gang scheduling — for the label of value "false" as for
// "true", and lint warns of exactly the first.
func TestGangSchedulingLabelByPresence(t *testing.T) {
	for _, value := range []string{"false", "true"} {
		doc := strings.Replace(rayClusterDoc("gang"), "  name: gang\n", "  name: gang\n  labels: {ray.io/gang-scheduling-enabled: \""+value+"\"}\n", 1)
		warned := slices.ContainsFunc(lintString(t, doc), func(f validation.Finding) bool { return f.ID == "gang-scheduling-label" })
		u := lintDocs(t, doc)[0].Object
		rc := &rayv1.RayCluster{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, rc); err != nil {
			t.Fatal(err)
		}
		pod := &corev1.Pod{}
		(&yunikorn.YuniKornScheduler{}).AddMetadataToChildResource(context.Background(), rc, pod, "gpu")
		gang := pod.Annotations[yunikorn.YuniKornTaskGroupsAnnotationName] != ""
		if !gang {
			t.Fatalf("%q: YuniKorn gives the pod no task groups: the operator does not read the label as lint says", value)
		}
		if warned != (value != "true") {
			t.Errorf("%q: gang-scheduling-label %v", value, warned)
		}
	}
}

// rayServiceDoc is a RayService the operator rules find nothing in.
const rayServiceDoc = `apiVersion: ray.io/v1
kind: RayService
metadata: {name: svc}
spec:
  serveConfigV2: |
    applications:
    - name: app
      import_path: app:deployment
  rayClusterConfig:
    headGroupSpec:
      rayStartParams: {}
      template:
        spec:
          containers: [{name: ray-head, image: rayproject/ray:2.54.0}]
`

// TestIncrementalUpgradeGateOffByDefault: upgrade-strategy-gate held to
// KubeRay v1.6.0's feature gates (a RayService upgrade needs a serving
// Ray to show): the gate its RayService controller reads the type under
// is off by default, and lint warns of the type.
func TestIncrementalUpgradeGateOffByDefault(t *testing.T) {
	if features.Enabled(features.RayServiceIncrementalUpgrade) {
		t.Fatal("KubeRay's RayServiceIncrementalUpgrade gate is on by default: upgrade-strategy-gate is wrong")
	}
	doc := strings.Replace(rayServiceDoc, "spec:\n", "spec:\n  upgradeStrategy: {type: NewClusterWithIncrementalUpgrade}\n", 1)
	for _, c := range []struct {
		typ  string
		want bool
	}{{"NewClusterWithIncrementalUpgrade", true}, {"NewCluster", false}} {
		fs := lintString(t, strings.Replace(doc, "NewClusterWithIncrementalUpgrade", c.typ, 1))
		if got := slices.ContainsFunc(fs, func(f validation.Finding) bool { return f.ID == "upgrade-strategy-gate" }); got != c.want {
			t.Errorf("%s: upgrade-strategy-gate %v, want %v", c.typ, got, c.want)
		}
	}
}

// TestServiceFieldsTheOperatorReplaces: service-field-ignored held to
// KubeRay v1.6.0's own builders, for the serve Service a RayService gives
// in full (which the operator builds only once Ray serves; the head
// Service is shown on the operator by TestOperatorMishandles).
func TestServiceFieldsTheOperatorReplaces(t *testing.T) {
	ctx := context.Background()
	given := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "other"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "serve"}, Ports: []corev1.ServicePort{{Name: "serve", Port: 8000}}}}
	rs := rayv1.RayService{ObjectMeta: metav1.ObjectMeta{Name: "svc", Namespace: "default"}, Spec: rayv1.RayServiceSpec{ServeService: given}}
	rc := rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: "svc-abcde", Namespace: "default"}, Spec: rayv1.RayClusterSpec{
		HeadGroupSpec: rayv1.HeadGroupSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "ray-head"}}}}}}}
	built, err := common.BuildServeServiceForRayService(ctx, rs, rc)
	if err != nil {
		t.Fatal(err)
	}
	if built.Spec.Selector["app"] != "" || built.Namespace != "default" {
		t.Fatalf("the operator's serve Service selects %v in %s: it keeps what lint says it replaces", built.Spec.Selector, built.Namespace)
	}
	doc := strings.Replace(strings.Replace(rayServiceDoc, "{name: svc}", "{name: svc, namespace: prod}", 1), "spec:\n",
		"spec:\n  serveService:\n    metadata: {namespace: other}\n    spec:\n      selector: {app: serve}\n      ports: [{name: serve, port: 8000}]\n", 1)
	var paths []string
	for _, f := range lintString(t, doc) {
		if f.ID == "service-field-ignored" {
			paths = append(paths, f.Path)
		}
	}
	if want := []string{"spec.serveService.metadata.namespace", "spec.serveService.spec.selector"}; !slices.Equal(paths, want) {
		t.Fatalf("service-field-ignored at %v, want %v", paths, want)
	}
}
