package manifest

import (
	"embed"
)

// The KubeRay CRDs at the pinned ray-operator version, copied verbatim from
// the module (config/crd/bases) by `go generate`; TestEmbeddedCRDsMatchModule
// fails if they differ from the module's files.
//
//go:generate sh -c "cp $(go list -m -f '{{.Dir}}' github.com/ray-project/kuberay/ray-operator)/config/crd/bases/ray.io_*.yaml crds/ && chmod 0644 crds/*.yaml"
//go:embed crds/ray.io_*.yaml
var kubeRayCRDs embed.FS
