package rayctl_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"gridweave.dev/rayctl"
)

func objects(t *testing.T, docs string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(docs, "\n---\n") {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			t.Fatalf("%v in\n%s", err, doc)
		}
		out = append(out, obj)
	}
	return out
}

// TestApplyOrderedSetOfAnyKind applies, in one ordered set, a namespace, a
// CRD and a custom resource of it, a ConfigMap, a Deployment and a
// RayCluster; waits for readiness with progress; re-applies (nothing
// changes); and deletes in reverse order.
func TestApplyOrderedSetOfAnyKind(t *testing.T) {
	e := newEnv(t)
	ctx := ctxFor(t, 3*time.Minute)
	c := e.c.WithDynamic(e.tc.Dynamic)
	ns := e.ns + "-apply"
	set := objects(t, fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
  labels: {team: ml}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.test.gridweave.dev
spec:
  group: test.gridweave.dev
  names: {kind: Widget, plural: widgets, singular: widget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
---
apiVersion: test.gridweave.dev/v1
kind: Widget
metadata:
  name: w1
  namespace: %[1]s
spec:
  size: 3
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: %[1]s
data:
  mode: fast
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: sandbox
  namespace: %[1]s
spec:
  replicas: 2
  selector:
    matchLabels: {app: sandbox}
  template:
    metadata:
      labels: {app: sandbox}
    spec:
      nodeSelector: {kubernetes.io/hostname: %[2]s}
      containers:
      - name: executor
        image: sandbox:1
---
apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: applied
  namespace: %[1]s
spec:
  rayVersion: "2.54.0"
  headGroupSpec:
    rayStartParams: {}
    template:
      spec:
        nodeSelector: {kubernetes.io/hostname: %[2]s}
        containers:
        - name: ray-head
          image: rayproject/ray:2.54.0-py312
  workerGroupSpecs:
  - groupName: gpu
    replicas: 1
    minReplicas: 1
    maxReplicas: 1
    rayStartParams: {}
    template:
      spec:
        nodeSelector: {kubernetes.io/hostname: %[3]s}
        containers:
        - name: ray-worker
          image: rayproject/ray:2.54.0-py312
          resources:
            limits: {nvidia.com/gpu: "1"}`, ns, e.cpuNode, e.gpuNode))

	var seen []string
	applied, err := c.Apply(ctx, set, rayctl.ApplyOptions{Wait: true, WaitOptions: rayctl.WaitOptions{
		Progress: func(p rayctl.Progress) { seen = append(seen, p.Kind+":"+p.State) },
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(applied) != len(set) {
		t.Fatalf("applied %d of %d", len(applied), len(set))
	}
	for _, obj := range applied {
		managed := false
		for _, mf := range obj.GetManagedFields() {
			if mf.Manager == rayctl.FieldManager && mf.Operation == metav1.ManagedFieldsOperationApply {
				managed = true
			}
		}
		if !managed {
			t.Errorf("%s %s is not managed by %q through apply: %+v", obj.GetKind(), obj.GetName(), rayctl.FieldManager, obj.GetManagedFields())
		}
	}
	joined := strings.Join(seen, " ")
	if !strings.Contains(joined, "Deployment:2/2 available") || !strings.Contains(joined, "RayCluster:ready") {
		t.Errorf("progress = %s", joined)
	}
	widget, err := e.tc.Dynamic.Resource(schema.GroupVersionResource{Group: "test.gridweave.dev", Version: "v1", Resource: "widgets"}).Namespace(ns).Get(ctx, "w1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if size, _, _ := unstructured.NestedInt64(widget.Object, "spec", "size"); size != 3 {
		t.Errorf("widget size %d", size)
	}

	// Re-applying the same set stores nothing new.
	again, err := c.Apply(ctx, set, rayctl.ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range again {
		if again[i].GetKind() == "RayCluster" || again[i].GetKind() == "Deployment" || again[i].GetKind() == "Namespace" || again[i].GetKind() == "CustomResourceDefinition" {
			// status writes by controllers move these; compare generations.
			if again[i].GetGeneration() != applied[i].GetGeneration() {
				t.Errorf("re-apply bumped %s generation %d → %d", again[i].GetKind(), applied[i].GetGeneration(), again[i].GetGeneration())
			}
			continue
		}
		if again[i].GetResourceVersion() != applied[i].GetResourceVersion() {
			t.Errorf("re-apply changed %s %s", again[i].GetKind(), again[i].GetName())
		}
	}

	// Bad input: a set with a nameless object fails naming it.
	bad := objects(t, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  namespace: "+ns)
	if _, err := c.Apply(ctx, bad, rayctl.ApplyOptions{}); err == nil || !strings.Contains(err.Error(), "objects[0].metadata.name") {
		t.Errorf("nameless object: %v", err)
	}

	if err := c.DeleteObjects(ctx, set, rayctl.DeleteOptions{Wait: true, Timeout: 2 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.tc.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace still there: %v", err)
	}
}

func TestRayJobAndRayService(t *testing.T) {
	e := newEnv(t)
	ctx := ctxFor(t, 3*time.Minute)
	rc, err := e.spec("job-cluster").Build()
	if err != nil {
		t.Fatal(err)
	}
	job := &rayv1.RayJob{
		ObjectMeta: metav1.ObjectMeta{Name: "train"},
		Spec: rayv1.RayJobSpec{
			Entrypoint:               "python -c 'print(1)'",
			ShutdownAfterJobFinishes: true,
			TTLSecondsAfterFinished:  60,
			RayClusterSpec:           &rc.Spec,
		},
	}
	if _, err := e.c.CreateJob(ctx, job); err != nil {
		t.Fatal(err)
	}
	// The operator makes the job's cluster and reports progress.
	var states []string
	if err := e.c.WaitJobRunning(ctx, "", "train", rayctl.WaitOptions{Timeout: 2 * time.Minute, Progress: func(p rayctl.Progress) { states = append(states, p.State) }}); err != nil {
		t.Fatalf("%v (states %v)", err, states)
	}
	st, err := e.c.JobStatus(ctx, "", "train")
	if err != nil || st.Cluster == "" || st.DeploymentStatus == "" {
		t.Fatalf("JobStatus = %+v, %v", st, err)
	}
	if _, err := e.c.GetCluster(ctx, "", st.Cluster); err != nil {
		t.Fatalf("the job's cluster %q: %v", st.Cluster, err)
	}
	bad := job.DeepCopy()
	bad.Name = "bad"
	bad.Spec.TTLSecondsAfterFinished = -1
	if _, err := e.c.CreateJob(ctx, bad); err == nil {
		t.Error("a negative TTL was accepted")
	}
	if err := e.c.DeleteJob(ctx, "", "train"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "RayJob deleted", func() (bool, string) {
		_, err := e.c.GetJob(ctx, "", "train")
		return errors.Is(err, rayctl.ErrNotFound), fmt.Sprint(err)
	})
	if err := e.c.DeleteJob(ctx, "", "train"); !errors.Is(err, rayctl.ErrNotFound) {
		t.Errorf("deleting a deleted RayJob: %v", err)
	}

	svc := &rayv1.RayService{
		ObjectMeta: metav1.ObjectMeta{Name: "serve"},
		Spec: rayv1.RayServiceSpec{
			ServeConfigV2:  "applications:\n- name: app\n  import_path: app:deployment\n  route_prefix: /\n",
			RayClusterSpec: rc.Spec,
		},
	}
	if _, err := e.c.CreateService(ctx, svc); err != nil {
		t.Fatal(err)
	}
	got, err := e.c.GetService(ctx, "", "serve")
	if err != nil || got.Spec.ServeConfigV2 == "" {
		t.Fatalf("GetService = %v, %v", got, err)
	}
	// The operator starts a pending cluster for it (Serve itself cannot run
	// on fake nodes, so it never turns ready here).
	waitFor(t, ctx, "RayService gets a pending cluster", func() (bool, string) {
		st, err := e.c.ServiceStatus(ctx, "", "serve")
		return err == nil && (st.PendingCluster != "" || st.ActiveCluster != ""), fmt.Sprintf("%+v %v", st, err)
	})
	badSvc := svc.DeepCopy()
	badSvc.Name = "bad-svc"
	badSvc.Spec.RayClusterDeletionDelaySeconds = ptr.To[int32](-5)
	if _, err := e.c.CreateService(ctx, badSvc); err == nil {
		t.Error("a negative deletion delay was accepted")
	}
	if err := e.c.DeleteService(ctx, "", "serve"); err != nil {
		t.Fatal(err)
	}
}
