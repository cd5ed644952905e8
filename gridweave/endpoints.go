package gridweave

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"gridweave.dev/gridweave/crd/v1alpha1"
	"gridweave.dev/rayctl"
)

// GPUProductLabel is the node label naming a node's GPU product (NVIDIA's
// GPU feature discovery sets it), which an endpoint's hardware selects.
const GPUProductLabel = "nvidia.com/gpu.product"

var nonName = regexp.MustCompile(`[^a-z0-9]+`)

// endpointGroupName is the worker group serving an endpoint on hardware:
// ep-<name>-<gpu type>-x<gpus>, at most 63 characters.
func endpointGroupName(name string, hw v1alpha1.Hardware) string {
	gpu := strings.Trim(nonName.ReplaceAllString(strings.ToLower(hw.GPUType), "-"), "-")
	g := fmt.Sprintf("ep-%s-%s-x%d", name, gpu, hw.GPUs)
	if len(g) > 63 {
		g = strings.TrimRight(g[:63], "-")
	}
	return g
}

// endpointHardwareChanged follows a patch of an endpoint's spec.hardware:
// the endpoint's RayCluster gets a worker group on the new hardware in
// the same update that removes the old one (rayctl's swap: the head and
// the other groups untouched), before the handler answers; the endpoint's
// status then records the new group and hardware. A patch that leaves the
// hardware alone changes nothing here.
func (s *Server) endpointHardwareChanged(ctx context.Context, patch map[string]any, obj *unstructured.Unstructured) error {
	spec, _ := patch["spec"].(map[string]any)
	if _, touched := spec["hardware"]; !touched {
		return nil
	}
	var ep v1alpha1.GridweaveEndpoint
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &ep); err != nil {
		return err
	}
	hw := ep.Spec.Hardware
	group := endpointGroupName(ep.Spec.Name, hw)
	old := ep.Status.WorkerGroup
	if old == group {
		return nil
	}
	rc, err := s.ray.GetCluster(ctx, s.cfg.Namespace, ep.Spec.Cluster)
	if err != nil {
		return fmt.Errorf("the endpoint's RayCluster %s: %w", ep.Spec.Cluster, err)
	}
	image := ""
	if cs := rc.Spec.HeadGroupSpec.Template.Spec.Containers; len(cs) > 0 {
		image = cs[0].Image
	}
	hasOld := false
	for _, g := range rc.Spec.WorkerGroupSpecs {
		if g.GroupName == old && old != "" {
			hasOld = true
			if cs := g.Template.Spec.Containers; len(cs) > 0 {
				image = cs[0].Image
			}
		}
	}
	newSpec, err := rayctl.WorkerGroup{Name: group, Image: image, Replicas: ptr.To(ep.Spec.Replicas), MinReplicas: ep.Spec.MinReplicas,
		GPUs: int(hw.GPUs), NodeSelector: map[string]string{GPUProductLabel: hw.GPUType},
		Labels: map[string]string{"gridweave.dev/endpoint": ep.Spec.Name}}.Build()
	if err != nil {
		return err
	}
	if hasOld {
		_, err = s.ray.SwapWorkerGroup(ctx, s.cfg.Namespace, ep.Spec.Cluster, old, newSpec)
	} else {
		_, err = s.ray.AddWorkerGroupSpec(ctx, s.cfg.Namespace, ep.Spec.Cluster, newSpec)
	}
	if err != nil {
		return fmt.Errorf("move endpoint %s to %d x %s: %w", ep.Spec.Name, hw.GPUs, hw.GPUType, err)
	}
	s.log.InfoContext(ctx, "endpoint moved to new hardware", "endpoint", ep.Spec.Name, "cluster", ep.Spec.Cluster, "old_group", old, "new_group", group)
	status, _ := json.Marshal(map[string]any{"status": map[string]any{
		"phase": v1alpha1.EndpointUpdating, "hardware": hw, "workerGroup": group, "readyReplicas": 0,
		"message": fmt.Sprintf("moved to %d x %s (worker group %s)", hw.GPUs, hw.GPUType, group),
	}})
	ri, err := s.crdClient(endpointKind)
	if err != nil {
		return err
	}
	updated, err := ri.Patch(ctx, obj.GetName(), types.MergePatchType, status, metav1.PatchOptions{FieldManager: "gridweave"}, "status")
	if err != nil {
		return err
	}
	obj.Object = updated.Object
	return nil
}
