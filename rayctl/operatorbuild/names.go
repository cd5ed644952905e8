package operatorbuild

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
)

// PodName is the name (or, with generateName, the prefix) the operator
// gives a pod of a group: the prefix cut to 50 characters, then
// "-head" or "-worker" (and "-" for generateName), in lowercase.
func PodName(prefix string, nodeType rayv1.RayNodeType, generateName bool) string {
	if len(prefix) > 50 {
		prefix = prefix[:50]
	}
	name := strings.ToLower(prefix + "-" + string(nodeType))
	if generateName {
		name += "-"
	}
	return name
}

// CheckedName is the name the operator makes of s where it names pods'
// accounts and Secrets: past 50 characters s is cut from the front, and a
// first character that is a digit or punctuation becomes "r".
func CheckedName(s string) string {
	if len(s) > 50 {
		s = s[len(s)-50:]
	}
	if s != "" {
		if r := rune(s[0]); unicode.IsDigit(r) || unicode.IsPunct(r) {
			s = "r" + s[1:]
		}
	}
	return s
}

// CheckedLabel is the label value the operator makes of s: past 63
// characters s is cut from the front, and a first character that is
// punctuation becomes "r".
func CheckedLabel(s string) string {
	if len(s) > 63 {
		s = s[len(s)-63:]
	}
	if s != "" && unicode.IsPunct(rune(s[0])) {
		s = "r" + s[1:]
	}
	return s
}

// identifier is the value of the ray.io/identifier label of a cluster's
// nodes of one type.
func identifier(cluster string, nodeType rayv1.RayNodeType) string {
	return CheckedLabel(cluster + "-" + string(nodeType))
}

// headServiceName is the name of the head Service the operator makes for
// a RayCluster (its headService's name when given) or, for a RayJob or a
// RayService, the one it keeps pointed at the cluster it runs on.
func headServiceName(creator CRD, spec rayv1.RayClusterSpec, owner string) string {
	if creator == RayCluster && spec.HeadGroupSpec.HeadService != nil && spec.HeadGroupSpec.HeadService.Name != "" {
		return spec.HeadGroupSpec.HeadService.Name
	}
	return owner + "-head-svc"
}

// containerCommand is the command the operator gives the containers it
// fills in: bash runs the arguments.
func containerCommand() []string { return []string{"/bin/bash", "-c", "--"} }

// rayIPOf is the deprecated RAY_IP: the first label of the head's name.
func rayIPOf(fqdn string) string {
	host, _, _ := strings.Cut(fqdn, ".")
	return host
}

var migResource = regexp.MustCompile(`nvidia\.com/mig-\d+g\.\d+gb$`)

// gpuResource tells the resources the operator counts as GPUs: those
// whose name ends in gpu, and NVIDIA's MIG slices.
func gpuResource(name string) bool {
	return strings.HasSuffix(name, "gpu") || migResource.MatchString(name)
}

func envExists(name string, env []corev1.EnvVar) bool {
	return slices.ContainsFunc(env, func(e corev1.EnvVar) bool { return e.Name == name })
}

func containerPort(c *corev1.Container, name string, fallback int32) int32 {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return fallback
}

// AuthOn tells whether the operator runs a cluster with token
// authentication (authOptions.mode token).
func AuthOn(spec *rayv1.RayClusterSpec) bool {
	return spec.AuthOptions != nil && spec.AuthOptions.Mode == rayv1.AuthModeToken
}

func k8sAuthOn(o *rayv1.AuthOptions) bool {
	return o != nil && o.EnableK8sTokenAuth != nil && *o.EnableK8sTokenAuth
}

// GCSFaultToleranceOn tells whether the operator sets a cluster up for
// GCS fault tolerance: gcsFaultToleranceOptions, or the ray.io/ft-enabled
// annotation "true" in any case.
func GCSFaultToleranceOn(spec *rayv1.RayClusterSpec, annotations map[string]string) bool {
	v, ok := annotations[FTEnabledAnnotation]
	return ok && strings.ToLower(v) == "true" || spec.GcsFaultToleranceOptions != nil
}

func autoscalingOn(spec *rayv1.RayClusterSpec) bool {
	return spec.EnableInTreeAutoscaling != nil && *spec.EnableInTreeAutoscaling
}

func autoscalerV2On(spec *rayv1.RayClusterSpec) bool {
	o := spec.AutoscalerOptions
	return o != nil && o.Version != nil && *o.Version == rayv1.AutoscalerVersionV2
}

// HeadPort is the port workers and drivers reach the head's GCS at: the
// head's rayStartParams port, 6379 by default.
func HeadPort(headParams map[string]string) string {
	if v, ok := headParams["port"]; ok {
		return v
	}
	return fmt.Sprint(defaultGCSPort)
}
