package rayctl_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"gridweave.dev/rayctl"
)

var (
	crdsResource        = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	rayClustersResource = rayv1.SchemeGroupVersion.WithResource("rayclusters")
)

// addFutureFields installs the RayCluster CRD with two properties that a
// newer KubeRay might add and these Go types do not know: spec.futureField
// and workerGroupSpecs[].futureGroupField. The CRD is put back at cleanup.
func addFutureFields(t *testing.T, e *env) {
	t.Helper()
	ctx := context.Background()
	crds := e.tc.Dynamic.Resource(crdsResource)
	crd, err := crds.Get(ctx, "rayclusters.ray.io", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	index := -1
	for i, v := range versions {
		if v.(map[string]any)["name"] == "v1" {
			index = i
		}
	}
	if index < 0 {
		t.Fatal("the RayCluster CRD serves no v1")
	}
	spec := fmt.Sprintf("/spec/versions/%d/schema/openAPIV3Schema/properties/spec/properties", index)
	paths := []string{spec + "/futureField", spec + "/workerGroupSpecs/items/properties/futureGroupField"}
	var add, remove []map[string]any
	for _, p := range paths {
		add = append(add, map[string]any{"op": "add", "path": p, "value": map[string]any{"type": "string"}})
		remove = append(remove, map[string]any{"op": "remove", "path": p})
	}
	patch := func(ops []map[string]any) error {
		raw, _ := json.Marshal(ops)
		_, err := crds.Patch(ctx, "rayclusters.ray.io", types.JSONPatchType, raw, metav1.PatchOptions{})
		return err
	}
	if err := patch(add); err != nil {
		t.Fatalf("add properties to the RayCluster CRD: %v", err)
	}
	t.Cleanup(func() {
		if err := patch(remove); err != nil {
			t.Errorf("put the RayCluster CRD back: %v", err)
		}
	})
}

// TestWritesKeepFieldsTheTypesDoNotKnow: on a RayCluster CRD newer than
// these Go types (one extra property in the spec, one in worker groups),
// set both, then add, scale, swap, replace and drain worker groups
// through rayctl: both fields survive every write.
func TestWritesKeepFieldsTheTypesDoNotKnow(t *testing.T) {
	e := newEnv(t)
	ctx := ctxFor(t, 3*time.Minute)
	addFutureFields(t, e)

	spec := e.spec("future")
	spec.Namespace = e.ns
	spec.WorkerGroups = []rayctl.WorkerGroup{{Name: "w", NodeHostname: e.cpuNode}}
	rc, err := spec.Build()
	if err != nil {
		t.Fatal(err)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rc)
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{Object: m}
	obj.SetAPIVersion(rayv1.SchemeGroupVersion.String())
	obj.SetKind("RayCluster")
	_ = unstructured.SetNestedField(obj.Object, "set by a newer client", "spec", "futureField")
	groups, _, _ := unstructured.NestedSlice(obj.Object, "spec", "workerGroupSpecs")
	groups[0].(map[string]any)["futureGroupField"] = "of group w"
	_ = unstructured.SetNestedSlice(obj.Object, groups, "spec", "workerGroupSpecs")
	rcs := e.tc.Dynamic.Resource(rayClustersResource).Namespace(e.ns)
	// The API server takes a moment to serve the new schema; until then it
	// prunes the new fields. Dry runs tell when it is there.
	waitFor(t, ctx, "the new CRD schema served", func() (bool, string) {
		out, err := rcs.Create(ctx, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, err.Error()
		}
		v, _, _ := unstructured.NestedString(out.Object, "spec", "futureField")
		return v != "", "spec.futureField pruned"
	})
	if _, err := rcs.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	check := func(after string) {
		t.Helper()
		got, err := rcs.Get(ctx, "future", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if v, _, _ := unstructured.NestedString(got.Object, "spec", "futureField"); v != "set by a newer client" {
			t.Errorf("after %s: spec.futureField = %q, want it kept", after, v)
		}
		groups, _, _ := unstructured.NestedSlice(got.Object, "spec", "workerGroupSpecs")
		found := false
		for _, g := range groups {
			g := g.(map[string]any)
			if g["groupName"] == "w" {
				found = true
				if g["futureGroupField"] != "of group w" {
					t.Errorf("after %s: group w's futureGroupField = %v, want it kept", after, g["futureGroupField"])
				}
			} else if _, ok := g["futureGroupField"]; ok {
				t.Errorf("after %s: group %v carries futureGroupField %v", after, g["groupName"], g["futureGroupField"])
			}
		}
		if !found {
			t.Fatalf("after %s: group w is gone", after)
		}
	}
	check("create")
	if _, err := e.c.AddWorkerGroup(ctx, "", "future", rayctl.WorkerGroup{Name: "gpu", NodeHostname: e.gpuNode, GPUs: 1}); err != nil {
		t.Fatal(err)
	}
	check("adding a worker group")
	if _, err := e.c.ScaleGroup(ctx, "", "future", "w", rayctl.Scale{Replicas: ptr.To[int32](0)}); err != nil {
		t.Fatal(err)
	}
	check("scaling group w")
	next, _ := rayctl.WorkerGroup{Name: "gpu2", NodeHostname: e.gpuNode, GPUs: 2}.Build()
	if _, err := e.c.SwapWorkerGroup(ctx, "", "future", "gpu", next); err != nil {
		t.Fatal(err)
	}
	check("swapping group gpu")
	w, _ := rayctl.WorkerGroup{Name: "w", NodeHostname: e.cpuNode, Replicas: ptr.To[int32](1)}.Build()
	extra, _ := rayctl.WorkerGroup{Name: "extra", NodeHostname: e.cpuNode, Replicas: ptr.To[int32](0)}.Build()
	if _, err := e.c.ReplaceWorkerGroups(ctx, "", "future", []rayv1.WorkerGroupSpec{extra, w}); err != nil {
		t.Fatal(err)
	}
	check("replacing the worker groups")
	if _, err := e.c.RemoveWorkerGroup(ctx, "", "future", "extra", rayctl.RemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	check("draining and removing a worker group")
}
