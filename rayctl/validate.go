package rayctl

import (
	"fmt"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// ValidateCluster checks a RayCluster with the rules the KubeRay v1.6.0
// operator checks before reconciling (operatorrules.go, kept equal to the
// operator's own code by a differential test), plus unique worker group
// names and group names usable as label values.
// Errors wrap ErrInvalidSpec.
func ValidateCluster(rc *rayv1.RayCluster) error {
	if err := operatorClusterMetadata(rc.ObjectMeta); err != nil {
		return &InvalidSpecError{Field: "metadata.name", Problem: err.Error()}
	}
	seen := map[string]bool{}
	for i, g := range rc.Spec.WorkerGroupSpecs {
		field := fmt.Sprintf("spec.workerGroupSpecs[%d].groupName", i)
		if g.GroupName == "" {
			return invalid(field, "is required")
		}
		if errs := validation.IsValidLabelValue(g.GroupName); len(errs) > 0 {
			return invalid(field, "%q: %s", g.GroupName, errs[0])
		}
		if seen[g.GroupName] {
			return invalid(field, "%q is used by two groups", g.GroupName)
		}
		seen[g.GroupName] = true
	}
	if err := operatorClusterSpec(&rc.Spec, rc.Annotations); err != nil {
		return &InvalidSpecError{Field: "spec", Problem: err.Error()}
	}
	return nil
}

// ValidateWorkerGroup checks one worker group the way ValidateCluster
// would inside a cluster spec with the given autoscaling setting.
func ValidateWorkerGroup(g rayv1.WorkerGroupSpec, autoscaling bool) error {
	spec := rayv1.RayClusterSpec{
		EnableInTreeAutoscaling: &autoscaling,
		HeadGroupSpec:           rayv1.HeadGroupSpec{Template: placeholderHeadTemplate()},
		WorkerGroupSpecs:        []rayv1.WorkerGroupSpec{g},
	}
	return ValidateCluster(&rayv1.RayCluster{ObjectMeta: placeholderMeta(), Spec: spec})
}
