package rayctl_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"gridweave.dev/rayctl"
	"gridweave.dev/rayctl/rayctltest"
)

func fakeCluster(t *testing.T) (*rayctltest.Fakes, *rayv1.RayCluster) {
	t.Helper()
	rc, err := rayctl.ClusterSpec{Name: "c", Namespace: "ns", WorkerGroups: []rayctl.WorkerGroup{{Name: "w"}}}.Build()
	if err != nil {
		t.Fatal(err)
	}
	return rayctltest.New(t, "ns", rc), rc
}

func TestUpdatesRetryOnConflict(t *testing.T) {
	f, _ := fakeCluster(t)
	conflicts := rayctltest.InjectConflicts(&f.Ray.Fake, "rayclusters", 3)
	out, err := f.Client.AddWorkerGroup(context.Background(), "", "c", rayctl.WorkerGroup{Name: "gpu", GPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	if conflicts.Injected.Load() != 3 || conflicts.Passed.Load() != 1 {
		t.Fatalf("updates: %d conflicts, %d through; want 3 and 1", conflicts.Injected.Load(), conflicts.Passed.Load())
	}
	if len(out.Spec.WorkerGroupSpecs) != 2 {
		t.Fatalf("groups %d", len(out.Spec.WorkerGroupSpecs))
	}
}

func TestConflictRetriesAreBounded(t *testing.T) {
	rc, _ := rayctl.ClusterSpec{Name: "c", Namespace: "ns"}.Build()
	f := rayctltest.New(t, "ns", rc)
	c, _ := rayctl.New(f.Kube, f.Ray, &rayctl.Options{Namespace: "ns", Backoff: &wait.Backoff{Steps: 4, Duration: time.Millisecond, Factor: 1}})
	conflicts := rayctltest.InjectConflicts(&f.Ray.Fake, "rayclusters", 100)
	_, err := c.ScaleGroup(context.Background(), "", "c", "w", rayctl.Scale{Replicas: ptr.To[int32](1)})
	if !errors.Is(err, rayctl.ErrGroupNotFound) {
		t.Fatalf("scale of a missing group: %v (no update should be tried)", err)
	}
	_, err = c.AddWorkerGroup(context.Background(), "", "c", rayctl.WorkerGroup{Name: "w"})
	if !apierrors.IsConflict(err) {
		t.Fatalf("after the retries: %v, want the conflict", err)
	}
	if conflicts.Injected.Load() != 4 {
		t.Fatalf("%d attempts, want 4", conflicts.Injected.Load())
	}
}

func TestWaitClusterReadyOnFakes(t *testing.T) {
	f, _ := fakeCluster(t)
	ctx := context.Background()
	go func() {
		time.Sleep(50 * time.Millisecond)
		_ = rayctltest.MarkClusterReady(ctx, f.Ray, "ns", "c")
	}()
	var states []string
	if err := f.Client.WaitClusterReady(ctx, "", "c", rayctl.WaitOptions{Timeout: 10 * time.Second, Progress: func(p rayctl.Progress) { states = append(states, p.State) }}); err != nil {
		t.Fatal(err)
	}
	if states[len(states)-1] != "ready" {
		t.Fatalf("states %v", states)
	}
}

func TestWorkerGroupBuild(t *testing.T) {
	g, err := rayctl.WorkerGroup{Name: "gpu", NodeHostname: "box-1", GPUs: 4, CPU: "8", Memory: "64Gi",
		RayStartParams: map[string]string{"num-gpus": "4"}, Labels: map[string]string{"team": "ml"}, Env: map[string]string{"B": "2", "A": "1"}}.Build()
	if err != nil {
		t.Fatal(err)
	}
	ctr := g.Template.Spec.Containers[0]
	if q := ctr.Resources.Limits["nvidia.com/gpu"]; q.Value() != 4 {
		t.Errorf("GPU limit %s", q.String())
	}
	if ctr.Resources.Requests.Cpu().String() != "8" || ctr.Resources.Limits.Memory().String() != "64Gi" {
		t.Errorf("resources %+v", ctr.Resources)
	}
	if g.Template.Spec.NodeSelector[corev1.LabelHostname] != "box-1" {
		t.Errorf("node selector %v", g.Template.Spec.NodeSelector)
	}
	if len(g.Template.Spec.Tolerations) != 1 || g.Template.Spec.Tolerations[0].Key != "nvidia.com/gpu" {
		t.Errorf("tolerations %v", g.Template.Spec.Tolerations)
	}
	if ctr.Env[0].Name != "A" || *g.Replicas != 1 || *g.MinReplicas != 0 || *g.MaxReplicas != 1 {
		t.Errorf("env %v replicas %d/%d/%d", ctr.Env, *g.Replicas, *g.MinReplicas, *g.MaxReplicas)
	}
	if err := rayctl.ValidateWorkerGroup(g, false); err != nil {
		t.Errorf("built group fails KubeRay validation: %v", err)
	}

	for _, c := range []struct {
		g     rayctl.WorkerGroup
		field string
	}{
		{rayctl.WorkerGroup{}, "name"},
		{rayctl.WorkerGroup{Name: "x", GPUs: -1}, "gpus"},
		{rayctl.WorkerGroup{Name: "x", CPU: "lots"}, "cpu"},
		{rayctl.WorkerGroup{Name: "x", Memory: "-1Gi"}, "memory"},
		{rayctl.WorkerGroup{Name: "x", GPUResource: "gpu"}, "gpu_resource"},
		{rayctl.WorkerGroup{Name: "x", Replicas: ptr.To[int32](5), MaxReplicas: ptr.To[int32](2)}, "replicas"},
		{rayctl.WorkerGroup{Name: "x", MinReplicas: ptr.To[int32](3), MaxReplicas: ptr.To[int32](2), Replicas: ptr.To[int32](2)}, "min_replicas"},
	} {
		_, err := c.g.Build()
		var ise *rayctl.InvalidSpecError
		if !errors.As(err, &ise) || ise.Field != c.field {
			t.Errorf("Build(%+v) = %v, want an error on %s", c.g, err, c.field)
		}
	}
	_, err = rayctl.ClusterSpec{Name: "c", WorkerGroups: []rayctl.WorkerGroup{{Name: "ok"}, {Name: "bad", CPU: "x"}}}.Build()
	if err == nil || !strings.Contains(err.Error(), "worker_groups[1].cpu") {
		t.Errorf("cluster spec error %v, want worker_groups[1].cpu", err)
	}
}

func TestValidateUsesKubeRayRules(t *testing.T) {
	rc, _ := rayctl.ClusterSpec{Name: "c", WorkerGroups: []rayctl.WorkerGroup{{Name: "w", RayStartParams: map[string]string{"num-cpus": "2"}}}}.Build()
	rc.Spec.WorkerGroupSpecs[0].Resources = map[string]string{"CPU": "2"}
	if err := rayctl.ValidateCluster(rc); !errors.Is(err, rayctl.ErrInvalidSpec) || !strings.Contains(err.Error(), "rayStartParams") {
		t.Errorf("resources with num-cpus: %v", err)
	}
	rc, _ = rayctl.ClusterSpec{Name: "c", WorkerGroups: []rayctl.WorkerGroup{{Name: "w"}, {Name: "w"}}}.Build()
	if err := rayctl.ValidateCluster(rc); err == nil || !strings.Contains(err.Error(), "used by two groups") {
		t.Errorf("duplicate group names: %v", err)
	}
	rc, _ = rayctl.ClusterSpec{Name: "c", WorkerGroups: []rayctl.WorkerGroup{{Name: "w"}}}.Build()
	rc.Spec.WorkerGroupSpecs[0].MinReplicas = nil
	if err := rayctl.ValidateCluster(rc); err == nil {
		t.Error("a group without minReplicas passed (KubeRay requires it without autoscaling)")
	}
}
