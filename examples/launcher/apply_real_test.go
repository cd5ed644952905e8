package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"gridweave.dev/internal/testcluster"
	"gridweave.dev/manifest"
	"gridweave.dev/rayctl"
)

func TestMain(m *testing.M) { os.Exit(testcluster.RunMain(m)) }

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
	for i, name := range []string{"launch-gpu-0", "launch-gpu-1", "launch-gpu-2", "launch-gpu-3"} {
		if _, err := tc.AddNode(ctx, name, big, nil, "198.18."+string(rune('0'+i))+"0.0/24"); err != nil {
			t.Fatal(err)
		}
	}
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "training-high"}, Value: 1000}
	if _, err := tc.Kube.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c, err := rayctl.New(tc.Kube, tc.Ray, nil)
	if err != nil {
		t.Fatal(err)
	}
	c = c.WithDynamic(tc.Dynamic)

	for _, infraFile := range []string{"grpo_swe.infra.yaml", "grpo_swe_sglang.infra.yaml"} {
		t.Run(infraFile, func(t *testing.T) {
			r, err := manifest.LoadRecipe(filepath.Join(specs, "grpo_swe.recipe.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			in, err := manifest.LoadInfra(filepath.Join(specs, infraFile))
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
