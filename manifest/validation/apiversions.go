package validation

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// KubernetesVersion is a Kubernetes release, major and minor.
type KubernetesVersion struct{ Major, Minor int }

func (k KubernetesVersion) String() string { return fmt.Sprintf("%d.%d", k.Major, k.Minor) }

func (k KubernetesVersion) atLeast(major, minor int) bool {
	return k.Major > major || k.Major == major && k.Minor >= minor
}

// DefaultKubernetesVersion is the release lint targets unless told
// otherwise: the one whose API types (k8s.io/api) this module pins.
var DefaultKubernetesVersion = KubernetesVersion{1, 35}

// ParseKubernetesVersion reads "1.35", "v1.35", "1.35.2", and what
// `kubectl version` prints for managed clusters ("v1.30.4-gke.1348000",
// "v1.29.2+k3s1").
func ParseKubernetesVersion(s string) (KubernetesVersion, error) {
	core, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimSpace(s), "v"), "+") // 1.29.2+k3s1
	core, _, _ = strings.Cut(core, "-")                                           // 1.30.4-gke.1348000
	parts := strings.Split(core, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return KubernetesVersion{}, fmt.Errorf("kubernetes version %q: want MAJOR.MINOR, e.g. 1.35", s)
	}
	var nums [3]int
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || p == "" || strings.Trim(p, "0123456789") != "" {
			return KubernetesVersion{}, fmt.Errorf("kubernetes version %q: %q is not a number", s, p)
		}
		nums[i] = n
	}
	if nums[0] != 1 {
		return KubernetesVersion{}, fmt.Errorf("kubernetes version %q: only 1.x releases exist", s)
	}
	return KubernetesVersion{nums[0], nums[1]}, nil
}

// Option configures a Validator.
type Option func(*Validator)

// TargetKubernetes makes the Validator judge API versions as the given
// release serves them: a version removed by then is an error, a
// deprecated one a warning (DefaultKubernetesVersion otherwise). The
// schemas and checks stay those of the pinned release.
func TargetKubernetes(k KubernetesVersion) Option { return func(v *Validator) { v.target = k } }

// apiLifecycle is when a built-in API version was deprecated and removed,
// and what replaces it.
type apiLifecycle struct {
	deprecated, removed [2]int
	replacement         schema.GroupVersionKind
}

// lifecycleOf reads an API version's lifecycle from its Go type, as
// Kubernetes' prerelease-lifecycle generator records it (the API server
// stops serving the version at its removal release), or from removedTypes
// for versions whose types no longer exist in client-go.
func lifecycleOf(gvk schema.GroupVersionKind) (apiLifecycle, bool) {
	if l, ok := removedTypes[gvk]; ok {
		return l, true
	}
	if known, ok := lifecycles.Load(gvk); ok {
		l := known.(apiLifecycle)
		return l, l != apiLifecycle{}
	}
	l, ok := typeLifecycle(gvk)
	lifecycles.Store(gvk, l)
	return l, ok
}

// lifecycles caches typeLifecycle by kind (apiLifecycle{}: none).
var lifecycles sync.Map

func typeLifecycle(gvk schema.GroupVersionKind) (apiLifecycle, bool) {
	obj, err := clientgoscheme.Scheme.New(gvk)
	if err != nil {
		return apiLifecycle{}, false
	}
	lc, ok := obj.(interface {
		APILifecycleDeprecated() (major, minor int)
		APILifecycleRemoved() (major, minor int)
	})
	if !ok {
		return apiLifecycle{}, false
	}
	var l apiLifecycle
	l.deprecated[0], l.deprecated[1] = lc.APILifecycleDeprecated()
	l.removed[0], l.removed[1] = lc.APILifecycleRemoved()
	if r, ok := obj.(interface {
		APILifecycleReplacement() schema.GroupVersionKind
	}); ok {
		l.replacement = r.APILifecycleReplacement()
	}
	return l, l.removed != [2]int{} || l.deprecated != [2]int{}
}

// removedTypes are removed API versions whose Go types are not in
// client-go's scheme.
var removedTypes = map[schema.GroupVersionKind]apiLifecycle{
	{Group: "apiextensions.k8s.io", Version: "v1beta1", Kind: "CustomResourceDefinition"}: {
		deprecated: [2]int{1, 16}, removed: [2]int{1, 22}, replacement: crdKind,
	},
	{Group: "policy", Version: "v1beta1", Kind: "PodSecurityPolicy"}: {
		deprecated: [2]int{1, 21}, removed: [2]int{1, 25}, // replaced by Pod Security admission, not by a kind
	},
	{Group: "extensions", Version: "v1beta1", Kind: "PodSecurityPolicy"}: {
		deprecated: [2]int{1, 11}, removed: [2]int{1, 16},
		replacement: schema.GroupVersionKind{Group: "policy", Version: "v1beta1", Kind: "PodSecurityPolicy"},
	},
	{Group: "apiregistration.k8s.io", Version: "v1beta1", Kind: "APIService"}: {
		deprecated: [2]int{1, 19}, removed: [2]int{1, 22},
		replacement: schema.GroupVersionKind{Group: "apiregistration.k8s.io", Version: "v1", Kind: "APIService"},
	},
}

// apiVersionFindings judges an object's API version against the target
// release: removed is an error (the API server refuses the object
// outright, so nothing else is checked), deprecated a warning. KubeRay's
// v1alpha1 is a warning: served, but not the version the operator works
// in or documents.
func (v *Validator) apiVersionFindings(gvk schema.GroupVersionKind, at func(id string, severity Severity, path, msg, fix string) Finding) (out []Finding, removed bool) {
	if gvk.Group == rayv1.GroupVersion.Group && gvk.Version == "v1alpha1" {
		return []Finding{at("deprecated-api", SeverityWarning, "apiVersion",
			fmt.Sprintf("ray.io/v1alpha1 is KubeRay's API from before v1.0; KubeRay %s serves it for compatibility, and its operator, documentation and samples work in ray.io/v1", KubeRayVersion),
			"use apiVersion ray.io/v1")}, false
	}
	l, ok := lifecycleOf(gvk)
	if !ok {
		return prereleaseFinding(gvk, v.target, at), false
	}
	fix := ""
	switch {
	case l.replacement.Empty():
	case l.replacement.Kind == gvk.Kind:
		fix = "use apiVersion " + l.replacement.GroupVersion().String()
	default:
		fix = fmt.Sprintf("use apiVersion %s, kind %s", l.replacement.GroupVersion(), l.replacement.Kind)
	}
	target := v.target
	switch {
	case l.removed != [2]int{} && target.atLeast(l.removed[0], l.removed[1]):
		return []Finding{at("removed-api", SeverityError, "apiVersion",
			fmt.Sprintf("%s %s was removed in Kubernetes %d.%d; a %s API server refuses it", gvk.GroupVersion(), gvk.Kind, l.removed[0], l.removed[1], target), fix)}, true
	case l.deprecated != [2]int{} && target.atLeast(l.deprecated[0], l.deprecated[1]):
		msg := fmt.Sprintf("%s %s is deprecated since Kubernetes %d.%d", gvk.GroupVersion(), gvk.Kind, l.deprecated[0], l.deprecated[1])
		if l.removed != [2]int{} {
			msg += fmt.Sprintf(" and removed in %d.%d", l.removed[0], l.removed[1])
		}
		return []Finding{at("deprecated-api", SeverityWarning, "apiVersion", msg, fix)}, false
	}
	return prereleaseFinding(gvk, v.target, at), false
}

// prereleaseFinding warns of a built-in alpha or beta API version: a
// cluster serves it only if its API server enables it.
func prereleaseFinding(gvk schema.GroupVersionKind, target KubernetesVersion, at func(id string, severity Severity, path, msg, fix string) Finding) []Finding {
	if !prerelease(gvk.Version) || builtinType(gvk) == nil {
		return nil
	}
	if strings.Contains(gvk.Version, "beta") && !target.atLeast(1, 24) {
		return nil // before 1.24 beta versions were served by default
	}
	return []Finding{at("prerelease-api", SeverityWarning, "apiVersion",
		fmt.Sprintf("%s is a pre-release API version: an API server serves it only when it is enabled (--runtime-config)", gvk.GroupVersion()),
		"check that the cluster serves it (kubectl api-versions), or use the GA version")}
}
