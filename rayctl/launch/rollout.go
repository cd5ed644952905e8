package launch

import (
	"context"
	"errors"
	"fmt"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"gridweave.dev/rayctl"
)

// KubeRay reconciles a RayCluster's scale (replicas and bounds, the
// groups there are) on running clusters, but never replaces a running
// pod when its template changes: a changed image, resource, env var or
// rayStartParams reaches only pods created later. UnrolledChanges lists,
// field by field, what an update of current to next changes that running
// pods will not get.
func UnrolledChanges(current, next *rayv1.RayClusterSpec) []string {
	var out []string
	changed := func(path string, a, b any) {
		if !equality.Semantic.DeepEqual(a, b) {
			out = append(out, path)
		}
	}
	changed("rayVersion", current.RayVersion, next.RayVersion)
	changed("enableInTreeAutoscaling", current.EnableInTreeAutoscaling, next.EnableInTreeAutoscaling)
	changed("autoscalerOptions", current.AutoscalerOptions, next.AutoscalerOptions)
	changed("headGroupSpec.rayStartParams", current.HeadGroupSpec.RayStartParams, next.HeadGroupSpec.RayStartParams)
	changed("headGroupSpec.template", current.HeadGroupSpec.Template, next.HeadGroupSpec.Template)
	groups := map[string]rayv1.WorkerGroupSpec{}
	for _, g := range current.WorkerGroupSpecs {
		groups[g.GroupName] = g
	}
	for _, g := range next.WorkerGroupSpecs {
		old, ok := groups[g.GroupName]
		if !ok {
			continue // a new group: its pods are new
		}
		p := fmt.Sprintf("workerGroupSpecs[%s]", g.GroupName)
		changed(p+".rayStartParams", old.RayStartParams, g.RayStartParams)
		changed(p+".template", old.Template, g.Template)
		// The CRD defaults numOfHosts to 1.
		changed(p+".numOfHosts", max(old.NumOfHosts, 1), max(g.NumOfHosts, 1))
	}
	return out
}

// warnUnrolled says, for each RayCluster of the plan that already runs,
// what the apply changes that its running pods will not get, and what to
// do about it.
func (s *Session) warnUnrolled(ctx context.Context, p *Plan) error {
	for _, o := range p.Objects {
		if o.GetKind() != "RayCluster" {
			continue
		}
		current, err := s.Rayctl.GetCluster(ctx, o.GetNamespace(), o.GetName())
		if errors.Is(err, rayctl.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		next, err := rayClusterOf(o)
		if err != nil {
			return err
		}
		for _, path := range UnrolledChanges(&current.Spec, &next.Spec) {
			s.say("warning: RayCluster %s/%s: %s changes, and KubeRay does not roll spec changes out to running pods: only pods created later get it. "+
				"To apply it now: launcher cluster down %s -n %s, then launcher run again (or serve with a RayService, whose upgradeStrategy rolls a new cluster out)",
				o.GetNamespace(), o.GetName(), path, o.GetName(), o.GetNamespace())
		}
	}
	return nil
}

func rayClusterOf(o *unstructured.Unstructured) (*rayv1.RayCluster, error) {
	rc := &rayv1.RayCluster{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, rc); err != nil {
		return nil, fmt.Errorf("RayCluster %s: %w", o.GetName(), err)
	}
	return rc, nil
}
