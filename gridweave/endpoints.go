package gridweave

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"gridweave.dev/gridweave/endpoints"
)

// GPUProductLabel is the node label naming a node's GPU product (NVIDIA's
// GPU feature discovery sets it), which an endpoint's hardware selects.
const GPUProductLabel = endpoints.GPUProductLabel

// moveEndpoint follows a patch of an endpoint's spec.hardware (package
// endpoints): the endpoint as stored after the move, or as patched when
// it was on that hardware already.
func (s *Server) moveEndpoint(ctx context.Context, patched *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	ep, err := endpoints.FromUnstructured(patched)
	if err != nil {
		return nil, err
	}
	m := &endpoints.Mover{Ray: s.ray, Namespace: s.cfg.Namespace, Endpoints: endpoints.NewEndpoints(s.dynamic, s.cfg.Namespace), Logger: s.log}
	stored, moved, err := m.Move(ctx, ep)
	if err != nil || !moved {
		return patched, err
	}
	return stored, nil
}
