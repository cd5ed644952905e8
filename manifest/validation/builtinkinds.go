package validation

import (
	"reflect"
	"strings"
	"sync"

	"gridweave.dev/manifest/internal/yamlstream"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// builtinType is the Go type a built-in kind and version decodes into
// (nil: not a built-in). The kinds are client-go's scheme — every group,
// version and kind Kubernetes' own clients know — rather than a list kept
// by hand, plus apiextensions' CustomResourceDefinition, which lives in
// its own module. Only object kinds count (those with metadata): not the
// List kinds, options or watch events the scheme also registers.
func builtinType(gvk schema.GroupVersionKind) reflect.Type {
	if gvk == crdKind {
		return reflect.TypeFor[apiextensionsv1.CustomResourceDefinition]()
	}
	t, ok := clientgoscheme.Scheme.AllKnownTypes()[gvk]
	if !ok || strings.HasSuffix(gvk.Kind, "List") || notTopLevel[gvk.Kind] {
		return nil
	}
	if f, ok := t.FieldByName("ObjectMeta"); !ok || f.Type != reflect.TypeFor[metav1.ObjectMeta]() {
		return nil
	}
	return t
}

var crdKind = apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition")

// notTopLevel are kinds with metadata that the API server takes only as a
// subresource's body or keeps to itself, never as an object of their own.
var notTopLevel = map[string]bool{"Scale": true, "Eviction": true, "TokenRequest": true, "PodStatusResult": true, "RangeAllocation": true}

// prerelease reports whether an API version is an alpha or beta one:
// since Kubernetes 1.24 those are served only when the API server enables
// them.
func prerelease(version string) bool {
	return strings.Contains(version, "alpha") || strings.Contains(version, "beta")
}

// clusterScoped are the built-in kinds that have no namespace, by group
// and kind (the version does not change it). TestBuiltinKindsMatchTheAPIServer
// holds the list to a real API server's discovery.
var clusterScoped = map[schema.GroupKind]bool{
	{Kind: "Namespace"}: true, {Kind: "Node"}: true, {Kind: "PersistentVolume"}: true, {Kind: "ComponentStatus"}: true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}:                         true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}:                  true,
	{Group: "scheduling.k8s.io", Kind: "PriorityClass"}:                               true,
	{Group: "storage.k8s.io", Kind: "StorageClass"}:                                   true,
	{Group: "storage.k8s.io", Kind: "CSIDriver"}:                                      true,
	{Group: "storage.k8s.io", Kind: "CSINode"}:                                        true,
	{Group: "storage.k8s.io", Kind: "VolumeAttachment"}:                               true,
	{Group: "storage.k8s.io", Kind: "VolumeAttributesClass"}:                          true,
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:                 true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}:     true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}:   true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicy"}:        true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicyBinding"}: true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicy"}:          true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicyBinding"}:   true,
	{Group: "networking.k8s.io", Kind: "IngressClass"}:                                true,
	{Group: "networking.k8s.io", Kind: "IPAddress"}:                                   true,
	{Group: "networking.k8s.io", Kind: "ServiceCIDR"}:                                 true,
	{Group: "node.k8s.io", Kind: "RuntimeClass"}:                                      true,
	{Group: "certificates.k8s.io", Kind: "CertificateSigningRequest"}:                 true,
	{Group: "certificates.k8s.io", Kind: "ClusterTrustBundle"}:                        true,
	{Group: "flowcontrol.apiserver.k8s.io", Kind: "FlowSchema"}:                       true,
	{Group: "flowcontrol.apiserver.k8s.io", Kind: "PriorityLevelConfiguration"}:       true,
	{Group: "resource.k8s.io", Kind: "DeviceClass"}:                                   true,
	{Group: "resource.k8s.io", Kind: "ResourceSlice"}:                                 true,
	{Group: "resource.k8s.io", Kind: "DeviceTaintRule"}:                               true,
	{Group: "internal.apiserver.k8s.io", Kind: "StorageVersion"}:                      true,
	{Group: "storagemigration.k8s.io", Kind: "StorageVersionMigration"}:               true,
	{Group: "authentication.k8s.io", Kind: "TokenReview"}:                             true,
	{Group: "authentication.k8s.io", Kind: "SelfSubjectReview"}:                       true,
	{Group: "authorization.k8s.io", Kind: "SubjectAccessReview"}:                      true,
	{Group: "authorization.k8s.io", Kind: "SelfSubjectAccessReview"}:                  true,
	{Group: "authorization.k8s.io", Kind: "SelfSubjectRulesReview"}:                   true,
}

// templateField is where a pod template sits in a built-in type: the
// index path of the field and its JSON path.
type templateField struct {
	index   []int
	path    string
	pointer bool // the field is a *PodTemplateSpec
}

var templateFields sync.Map // reflect.Type → []templateField

var podTemplateSpecType = reflect.TypeFor[corev1.PodTemplateSpec]()

// podTemplateFieldsOf finds, once per type, every PodTemplateSpec field
// of a built-in type, through value structs (as in a CronJob's
// spec.jobTemplate.spec.template); the template itself may be a pointer.
func podTemplateFieldsOf(t reflect.Type) []templateField {
	if fs, ok := templateFields.Load(t); ok {
		return fs.([]templateField)
	}
	var out []templateField
	var walk func(t reflect.Type, index []int, path string, depth int)
	walk = func(t reflect.Type, index []int, path string, depth int) {
		if depth > 6 {
			return // templates sit near the top; recursive types end here
		}
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" || name == "metadata" || name == "status" {
				continue
			}
			ft, pointer := f.Type, false
			if ft.Kind() == reflect.Pointer {
				ft, pointer = ft.Elem(), true
			}
			if ft.Kind() != reflect.Struct {
				continue
			}
			p := path
			if name != "" && !f.Anonymous {
				p = yamlstream.JoinPath(path, name)
			}
			idx := append(append([]int(nil), index...), i)
			if ft == podTemplateSpecType {
				out = append(out, templateField{index: idx, path: p, pointer: pointer})
				continue
			}
			if pointer {
				continue // templates sit in value structs (a CronJob's job template too)
			}
			walk(ft, idx, p, depth+1)
		}
	}
	walk(t, nil, "", 0)
	templateFields.Store(t, out)
	return out
}
