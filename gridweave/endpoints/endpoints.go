package endpoints

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"gridweave.dev/gridweave/crd/v1alpha1"
	"gridweave.dev/rayctl"
)

// GPUProductLabel is the node label naming a node's GPU product (NVIDIA's
// GPU feature discovery sets it), which an endpoint's hardware selects.
const GPUProductLabel = "nvidia.com/gpu.product"

var nonName = regexp.MustCompile(`[^a-z0-9]+`)

// GroupName is the worker group serving endpoint name on hw:
// ep-<name>-<gpu type>-x<gpus>. A longer name than a group's 63
// characters is cut to 56 and ends in 6 hex digits of the whole name's
// SHA-256, so two kinds of hardware never share a group.
func GroupName(name string, hw v1alpha1.Hardware) string {
	gpu := strings.Trim(nonName.ReplaceAllString(strings.ToLower(hw.GPUType), "-"), "-")
	g := fmt.Sprintf("ep-%s-%s-x%d", name, gpu, hw.GPUs)
	if len(g) <= 63 {
		return g
	}
	sum := sha256.Sum256([]byte(g))
	return strings.TrimRight(g[:56], "-") + "-" + hex.EncodeToString(sum[:3])
}

// Endpoints is a typed client of the GridweaveEndpoints of one namespace.
type Endpoints struct {
	resource dynamic.ResourceInterface
}

// NewEndpoints is the GridweaveEndpoints of namespace.
func NewEndpoints(client dynamic.Interface, namespace string) *Endpoints {
	return &Endpoints{resource: client.Resource(v1alpha1.GroupVersion.WithResource(v1alpha1.EndpointResource)).Namespace(namespace)}
}

// FromUnstructured is the typed endpoint of obj.
func FromUnstructured(obj *unstructured.Unstructured) (*v1alpha1.GridweaveEndpoint, error) {
	var ep v1alpha1.GridweaveEndpoint
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &ep); err != nil {
		return nil, fmt.Errorf("the GridweaveEndpoint %s: %w", obj.GetName(), err)
	}
	return &ep, nil
}

// SetStatus replaces the endpoint's status (the status subresource) and
// returns the endpoint as stored.
func (e *Endpoints) SetStatus(ctx context.Context, name string, status v1alpha1.GridweaveEndpointStatus) (*unstructured.Unstructured, error) {
	patch, err := json.Marshal(map[string]any{"status": map[string]any{
		"phase": status.Phase, "hardware": status.Hardware, "workerGroup": status.WorkerGroup,
		"readyReplicas": status.ReadyReplicas, "message": status.Message,
	}})
	if err != nil {
		return nil, err
	}
	return e.resource.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "gridweave"}, "status")
}

// Mover moves endpoints to the hardware their specs name.
type Mover struct {
	// Ray changes the endpoints' RayClusters, in Namespace.
	Ray       *rayctl.Client
	Namespace string
	// Endpoints writes their statuses.
	Endpoints *Endpoints
	// Logger hears of each move; default discards.
	Logger *slog.Logger
}

// Move gives ep's RayCluster a worker group on ep.Spec.Hardware in place
// of the one its status names (added when it names none), and records
// it in ep's status; an endpoint already on its hardware is left as it
// is (moved false). It returns the endpoint as stored. A move that failed
// after its swap (the old group's pods, the status) is finished by the
// next one: a RayCluster that already holds the new group is not asked
// for it again.
func (m *Mover) Move(ctx context.Context, ep *v1alpha1.GridweaveEndpoint) (stored *unstructured.Unstructured, moved bool, err error) {
	hw := ep.Spec.Hardware
	group := GroupName(ep.Spec.Name, hw)
	old := ep.Status.WorkerGroup
	if old == group {
		return nil, false, nil
	}
	rc, err := m.Ray.GetCluster(ctx, m.Namespace, ep.Spec.Cluster)
	if err != nil {
		return nil, false, fmt.Errorf("the endpoint's RayCluster %s: %w", ep.Spec.Cluster, err)
	}
	image := ""
	if cs := rc.Spec.HeadGroupSpec.Template.Spec.Containers; len(cs) > 0 {
		image = cs[0].Image
	}
	hasOld, hasNew := false, false
	for _, g := range rc.Spec.WorkerGroupSpecs {
		if g.GroupName == old && old != "" {
			hasOld = true
			if cs := g.Template.Spec.Containers; len(cs) > 0 {
				image = cs[0].Image
			}
		}
		hasNew = hasNew || g.GroupName == group
	}
	spec, err := rayctl.WorkerGroup{Name: group, Image: image, Replicas: ptr.To(ep.Spec.Replicas), MinReplicas: ep.Spec.MinReplicas,
		GPUs: int(hw.GPUs), NodeSelector: map[string]string{GPUProductLabel: hw.GPUType},
		Labels: map[string]string{"gridweave.dev/endpoint": ep.Spec.Name}}.Build()
	if err != nil {
		return nil, false, err
	}
	switch {
	case hasNew && hasOld:
		// Both groups (the new one added by hand, or a move cut short
		// some other way): the old one goes, as a swap would take it.
		_, err = m.Ray.RemoveWorkerGroup(ctx, m.Namespace, ep.Spec.Cluster, old, rayctl.RemoveOptions{Immediate: true})
	case hasNew:
		// An earlier move's swap landed and what followed it failed (the
		// old group's pods, the status): this one finishes it.
		if old != "" {
			err = m.Ray.DeleteGroupPods(ctx, m.Namespace, ep.Spec.Cluster, old)
		}
	case hasOld:
		_, err = m.Ray.SwapWorkerGroup(ctx, m.Namespace, ep.Spec.Cluster, old, spec)
	default:
		_, err = m.Ray.AddWorkerGroupSpec(ctx, m.Namespace, ep.Spec.Cluster, spec)
	}
	if err != nil {
		return nil, false, fmt.Errorf("move endpoint %s to %d x %s: %w", ep.Spec.Name, hw.GPUs, hw.GPUType, err)
	}
	if m.Logger != nil {
		m.Logger.InfoContext(ctx, "endpoint moved to new hardware", "endpoint", ep.Spec.Name, "cluster", ep.Spec.Cluster, "old_group", old, "new_group", group)
	}
	stored, err = m.Endpoints.SetStatus(ctx, ep.Name, v1alpha1.GridweaveEndpointStatus{
		Phase: v1alpha1.EndpointUpdating, Hardware: &hw, WorkerGroup: group, ReadyReplicas: 0,
		Message: fmt.Sprintf("moved to %d x %s (worker group %s)", hw.GPUs, hw.GPUType, group),
	})
	return stored, err == nil, err
}
