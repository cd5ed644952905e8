package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Resources of the group, as the API server serves them.
const (
	JobResource      = "gridweavejobs"
	EndpointResource = "gridweaveendpoints"
)

// AddToScheme registers the types with a scheme.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &GridweaveJob{}, &GridweaveJobList{}, &GridweaveEndpoint{}, &GridweaveEndpointList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
