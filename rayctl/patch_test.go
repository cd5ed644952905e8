package rayctl

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	jsonpatch "gopkg.in/evanphx/json-patch.v4" // what the API server and the fake clientsets apply patches with
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

// serverDoc is the RayCluster as a newer server would hold it: what the Go
// types show, less the nulls and empty objects they make up, plus a field
// they do not know in the spec, in every worker group and in every
// container, each holding the name of its owner.
func serverDoc(t *testing.T, rc *rayv1.RayCluster) map[string]any {
	t.Helper()
	doc, err := jsonTree(rc)
	if err != nil {
		t.Fatal(err)
	}
	doc = withoutEmpty(doc).(map[string]any)
	spec := doc["spec"].(map[string]any)
	spec["futureField"] = "cluster"
	groups, _ := spec["workerGroupSpecs"].([]any)
	for _, g := range groups {
		g := g.(map[string]any)
		g["futureGroupField"] = g["groupName"]
		for _, ctr := range g["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any) {
			ctr := ctr.(map[string]any)
			ctr["futureContainerField"] = fmt.Sprintf("%s/%s", g["groupName"], ctr["name"])
		}
	}
	return doc
}

// withoutEmpty drops nulls and members left empty by that, as a server that
// never stored them shows the object.
func withoutEmpty(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, m := range v {
			m = withoutEmpty(m)
			if mm, ok := m.(map[string]any); m == nil || (ok && len(mm) == 0) {
				continue
			}
			out[k] = m
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, m := range v {
			out[i] = withoutEmpty(m)
		}
		return out
	}
	return v
}

// mutate makes one random edit of the kinds this package makes.
func mutate(r *rand.Rand, rc *rayv1.RayCluster, serial *int) string {
	groups := &rc.Spec.WorkerGroupSpecs
	pick := func() *rayv1.WorkerGroupSpec { return &(*groups)[r.IntN(len(*groups))] }
	*serial++
	switch op := r.IntN(9); {
	case op == 0 || len(*groups) == 0:
		g, _ := WorkerGroup{Name: fmt.Sprintf("g%d", *serial), GPUs: r.IntN(3), RayStartParams: map[string]string{"num-cpus": "1"}}.Build()
		*groups = slices.Insert(*groups, r.IntN(len(*groups)+1), g)
		return "add group " + g.GroupName
	case op == 1:
		i := r.IntN(len(*groups))
		name := (*groups)[i].GroupName
		*groups = slices.Delete(*groups, i, i+1)
		return "remove group " + name
	case op == 2:
		r.Shuffle(len(*groups), func(i, j int) { (*groups)[i], (*groups)[j] = (*groups)[j], (*groups)[i] })
		return "reorder groups"
	case op == 3:
		g := pick()
		g.RayStartParams[fmt.Sprintf("k%d", r.IntN(3))] = fmt.Sprint(*serial)
		return "rayStartParams of " + g.GroupName
	case op == 4:
		g := pick()
		g.Replicas, g.MinReplicas, g.MaxReplicas = ptr.To[int32](0), ptr.To[int32](0), ptr.To[int32](0)
		g.ScaleStrategy.WorkersToDelete = append(g.ScaleStrategy.WorkersToDelete, fmt.Sprintf("pod-%d", *serial))
		return "drain " + g.GroupName
	case op == 5:
		g := pick()
		spec := &g.Template.Spec
		spec.Containers = append(spec.Containers, corev1.Container{Name: fmt.Sprintf("side%d", *serial), Image: "busybox"})
		return "add container to " + g.GroupName
	case op == 6:
		g := pick()
		ctr := &g.Template.Spec.Containers[0]
		ctr.Ports = append(ctr.Ports, corev1.ContainerPort{ContainerPort: int32(8000 + *serial)})
		ctr.Resources.Limits = corev1.ResourceList{"cpu": resource.MustParse(fmt.Sprint(1 + r.IntN(4)))}
		return "ports and limits of " + g.GroupName
	case op == 7:
		g := pick()
		if g.Template.Labels == nil {
			g.Template.Labels = map[string]string{}
		}
		g.Template.Labels["ray.io/extra~"+fmt.Sprint(r.IntN(2))] = "x"
		delete(g.Template.Labels, "ray.io/extra~"+fmt.Sprint(r.IntN(2)))
		return "template labels of " + g.GroupName
	default:
		i := r.IntN(len(*groups))
		g, _ := WorkerGroup{Name: (*groups)[i].GroupName, CPU: fmt.Sprint(1 + r.IntN(8))}.Build()
		(*groups)[i] = g
		return "swap " + g.GroupName + " for a new template"
	}
}

// TestPatchKeepsWhatTheTypesDoNotKnow applies clusterPatch's patches, for
// thousands of random edits, to the cluster as a newer server holds it, and
// checks that the result is the edit in every field the Go types know and
// keeps every field they do not know where it belongs: in the spec, in
// each worker group that stays, in each container that stays.
func TestPatchKeepsWhatTheTypesDoNotKnow(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	serial := 0
	runs := 200
	if testing.Short() {
		runs = 50 // the same seed: the first 50 of make test's runs
	}
	for run := range runs {
		rc, err := ClusterSpec{Name: "c", Namespace: "ns", WorkerGroups: []WorkerGroup{{Name: "a"}, {Name: "b", GPUs: 1}}}.Build()
		if err != nil {
			t.Fatal(err)
		}
		rc.ResourceVersion = "1"
		for step := range 15 {
			server := serverDoc(t, rc)
			before := rc.DeepCopy()
			what := mutate(r, rc, &serial)
			patch, err := clusterPatch(before, rc)
			if err != nil {
				t.Fatal(err)
			}
			if patch == nil {
				continue
			}
			raw, _ := json.Marshal(server)
			p, err := jsonpatch.DecodePatch(patch)
			if err != nil {
				t.Fatalf("run %d step %d (%s): %v", run, step, what, err)
			}
			patched, err := p.Apply(raw)
			if err != nil {
				t.Fatalf("run %d step %d (%s): patch does not apply: %v\npatch %s", run, step, what, err, patch)
			}
			var got rayv1.RayCluster
			if err := json.Unmarshal(patched, &got); err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(got.Spec, rc.Spec) {
				t.Fatalf("run %d step %d (%s): patched spec differs from the edit\npatch %s", run, step, what, patch)
			}
			var doc map[string]any
			_ = json.Unmarshal(patched, &doc)
			spec := doc["spec"].(map[string]any)
			if spec["futureField"] != "cluster" {
				t.Fatalf("run %d step %d (%s): spec.futureField lost\npatch %s", run, step, what, patch)
			}
			kept := map[string]bool{}
			for _, g := range before.Spec.WorkerGroupSpecs {
				kept[g.GroupName] = true
			}
			groups, _ := spec["workerGroupSpecs"].([]any)
			for _, g := range groups {
				g := g.(map[string]any)
				name := g["groupName"].(string)
				if !kept[name] {
					if _, ok := g["futureGroupField"]; ok {
						t.Fatalf("run %d step %d (%s): new group %s carries another group's futureGroupField %v", run, step, what, name, g["futureGroupField"])
					}
					continue
				}
				if g["futureGroupField"] != name {
					t.Fatalf("run %d step %d (%s): group %s has futureGroupField %v, want its own\npatch %s", run, step, what, name, g["futureGroupField"], patch)
				}
				for _, ctr := range g["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any) {
					ctr := ctr.(map[string]any)
					if f, ok := ctr["futureContainerField"]; ok && f != name+"/"+ctr["name"].(string) {
						t.Fatalf("run %d step %d (%s): container %s of group %s has futureContainerField %v", run, step, what, ctr["name"], name, f)
					}
				}
			}
			rc.ResourceVersion = fmt.Sprint(run*100 + step + 2)
		}
	}
	// The patch is checked against the resourceVersion that was read.
	rc, _ := ClusterSpec{Name: "c", Namespace: "ns"}.Build()
	rc.ResourceVersion = "7"
	edited := rc.DeepCopy()
	edited.Spec.WorkerGroupSpecs = append(edited.Spec.WorkerGroupSpecs, rayv1.WorkerGroupSpec{GroupName: "x"})
	patch, _ := clusterPatch(rc, edited)
	var ops []map[string]any
	_ = json.Unmarshal(patch, &ops)
	if len(ops) == 0 || ops[0]["path"] != "/metadata/resourceVersion" || ops[0]["value"] != "7" {
		t.Fatalf("first operation %v, want the resourceVersion read", ops)
	}
	if p, _ := clusterPatch(rc, rc.DeepCopy()); p != nil {
		t.Fatalf("patch %s for no change", p)
	}
}
