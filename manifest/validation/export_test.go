package validation

import "k8s.io/apimachinery/pkg/runtime/schema"

// Namespaced is, for the tests, whether lint takes a built-in kind as
// namespaced.
func Namespaced(gvk schema.GroupVersionKind) bool { return !clusterScoped[gvk.GroupKind()] }
