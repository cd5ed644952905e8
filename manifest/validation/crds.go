package validation

import (
	"embed"
	"fmt"
	"strings"
)

// The CRDs lint validates against, copied verbatim by `go generate`:
// KubeRay's (config/crd/bases of ray-operator), the Gateway API's standard
// channel (config/crd/standard of gateway-api, the version KubeRay's module
// pins) and Gridweave's own (gridweave/crd/bases). TestEmbeddedCRDsMatchModule
// fails if any differs from its source.
//
//go:generate sh -c "cp $(go list -m -f '{{.Dir}}' github.com/ray-project/kuberay/ray-operator)/config/crd/bases/ray.io_*.yaml crds/ && cp $(go list -m -f '{{.Dir}}' sigs.k8s.io/gateway-api)/config/crd/standard/gateway.networking.k8s.io_*.yaml crds/ && cp ../../gridweave/crd/bases/gridweave.dev_*.yaml crds/ && chmod 0644 crds/*.yaml"
//go:embed crds/*.yaml
var embeddedCRDs embed.FS

// crdGroups are the API groups whose CRDs are embedded.
var crdGroups = map[string]bool{"ray.io": true, "gateway.networking.k8s.io": true, "gridweave.dev": true}

// crdFile is the embedded file of a group's kind: crds/<group>_<plural>.yaml,
// the plural made the way the CRDs make it.
func crdFileName(group, kind string) string {
	plural := strings.ToLower(kind)
	switch {
	case strings.HasSuffix(plural, "s"):
		plural += "es"
	case strings.HasSuffix(plural, "y") && !strings.ContainsAny(plural[len(plural)-2:len(plural)-1], "aeiou"):
		plural = strings.TrimSuffix(plural, "y") + "ies"
	default:
		plural += "s"
	}
	return "crds/" + group + "_" + plural + ".yaml"
}

// EmbeddedCRD is the verbatim YAML of an embedded CRD, by its name (e.g.
// "rayclusters.ray.io"): what `launcher doctor` compares a cluster's CRDs
// with.
func EmbeddedCRD(name string) ([]byte, error) {
	plural, group, ok := strings.Cut(name, ".")
	if !ok || !crdGroups[group] {
		return nil, fmt.Errorf("manifest: no embedded CRD %q", name)
	}
	return embeddedCRDs.ReadFile("crds/" + group + "_" + plural + ".yaml")
}
