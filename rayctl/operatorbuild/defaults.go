package operatorbuild

import (
	"math"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"k8s.io/utils/ptr"
)

// SetDefaults gives a cluster spec, as written, what it has by the time
// the operator builds from it: the CRD's defaults the API server fills
// in (a worker group's minReplicas 0 and maxReplicas 2³¹-1) and the
// rayStartParams maps the operator makes first (raycluster_controller.go
// setDefaults), which the builders write into.
func SetDefaults(spec *rayv1.RayClusterSpec) {
	if spec.HeadGroupSpec.RayStartParams == nil {
		spec.HeadGroupSpec.RayStartParams = map[string]string{}
	}
	for i := range spec.WorkerGroupSpecs {
		g := &spec.WorkerGroupSpecs[i]
		if g.RayStartParams == nil {
			g.RayStartParams = map[string]string{}
		}
		if g.MinReplicas == nil {
			g.MinReplicas = ptr.To[int32](0)
		}
		if g.MaxReplicas == nil {
			g.MaxReplicas = ptr.To[int32](math.MaxInt32)
		}
	}
}
