package rayctl

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Defaults of the typed specs.
const (
	DefaultRayVersion  = "2.54.0"
	DefaultImage       = "rayproject/ray:2.54.0-py312"
	DefaultGPUResource = "nvidia.com/gpu"
	DefaultCPU         = "1"
	DefaultMemory      = "2Gi"
)

// ClusterSpec is a RayCluster described by what people choose; Build turns
// it into the full object.
type ClusterSpec struct {
	Name         string            `json:"name"`
	Namespace    string            `json:"namespace,omitempty"`
	RayVersion   string            `json:"ray_version,omitempty"`
	Image        string            `json:"image,omitempty"`
	Labels       map[string]string `json:"labels,omitempty"`
	Head         HeadSpec          `json:"head"`
	WorkerGroups []WorkerGroup     `json:"worker_groups,omitempty"`
}

// HeadSpec describes the head pod.
type HeadSpec struct {
	CPU            string            `json:"cpu,omitempty"`
	Memory         string            `json:"memory,omitempty"`
	RayStartParams map[string]string `json:"ray_start_params,omitempty"`
	NodeSelector   map[string]string `json:"node_selector,omitempty"`
	ServiceType    string            `json:"service_type,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
}

// WorkerGroup describes a worker group.
type WorkerGroup struct {
	Name        string `json:"name"`
	Image       string `json:"image,omitempty"`
	Replicas    *int32 `json:"replicas,omitempty"`     // default 1
	MinReplicas *int32 `json:"min_replicas,omitempty"` // default 0
	MaxReplicas *int32 `json:"max_replicas,omitempty"` // default max(replicas, 1)
	// NodeHostname pins the group's pods to one node (kubernetes.io/hostname).
	NodeHostname string `json:"node_hostname,omitempty"`
	GPUs         int    `json:"gpus,omitempty"`
	// GPUResource is the extended resource name; default nvidia.com/gpu.
	GPUResource    string              `json:"gpu_resource,omitempty"`
	CPU            string              `json:"cpu,omitempty"`
	Memory         string              `json:"memory,omitempty"`
	Tolerations    []corev1.Toleration `json:"tolerations,omitempty"`
	RayStartParams map[string]string   `json:"ray_start_params,omitempty"`
	Labels         map[string]string   `json:"labels,omitempty"`
	Env            map[string]string   `json:"env,omitempty"`
	NodeSelector   map[string]string   `json:"node_selector,omitempty"`
}

// Build returns the RayCluster the spec describes (not yet validated; the
// create call validates).
func (s ClusterSpec) Build() (*rayv1.RayCluster, error) {
	if s.Name == "" {
		return nil, invalid("name", "is required")
	}
	version := s.RayVersion
	if version == "" {
		version = DefaultRayVersion
	}
	image := s.Image
	if image == "" {
		image = DefaultImage
	}
	headRes, err := resources("head", s.Head.CPU, s.Head.Memory, 0, "")
	if err != nil {
		return nil, err
	}
	head := rayv1.HeadGroupSpec{
		RayStartParams: nonNil(s.Head.RayStartParams),
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			NodeSelector: maps.Clone(s.Head.NodeSelector),
			Containers: []corev1.Container{{
				Name: "ray-head", Image: image, Resources: headRes, Env: envList(s.Head.Env),
				Ports: []corev1.ContainerPort{
					{Name: "gcs-server", ContainerPort: 6379},
					{Name: "dashboard", ContainerPort: 8265},
					{Name: "client", ContainerPort: 10001},
				},
			}},
		}},
	}
	if s.Head.ServiceType != "" {
		head.ServiceType = corev1.ServiceType(s.Head.ServiceType)
	}
	rc := &rayv1.RayCluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: rayv1.GroupVersion.String(), Kind: "RayCluster"},
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace, Labels: maps.Clone(s.Labels)},
		Spec:       rayv1.RayClusterSpec{RayVersion: version, HeadGroupSpec: head},
	}
	for i, g := range s.WorkerGroups {
		if g.Image == "" {
			g.Image = image
		}
		wg, err := g.Build()
		if err != nil {
			var ise *InvalidSpecError
			if asInvalid(err, &ise) {
				ise.Field = fmt.Sprintf("worker_groups[%d].%s", i, ise.Field)
			}
			return nil, err
		}
		rc.Spec.WorkerGroupSpecs = append(rc.Spec.WorkerGroupSpecs, wg)
	}
	return rc, nil
}

// Build returns the WorkerGroupSpec the typed group describes: CPU and
// memory requests equal to limits, GPUs as limits (and requests) of the
// GPU resource, a toleration for that resource when GPUs are requested and
// no toleration is given, and a node pin if NodeHostname is set.
func (g WorkerGroup) Build() (rayv1.WorkerGroupSpec, error) {
	if g.Name == "" {
		return rayv1.WorkerGroupSpec{}, invalid("name", "is required")
	}
	if g.GPUs < 0 {
		return rayv1.WorkerGroupSpec{}, invalid("gpus", "must not be negative")
	}
	gpuName := g.GPUResource
	if gpuName == "" {
		gpuName = DefaultGPUResource
	}
	if !strings.Contains(gpuName, "/") {
		return rayv1.WorkerGroupSpec{}, invalid("gpu_resource", "%q is not an extended resource name like nvidia.com/gpu", gpuName)
	}
	res, err := resources("", g.CPU, g.Memory, g.GPUs, gpuName)
	if err != nil {
		return rayv1.WorkerGroupSpec{}, err
	}
	replicas := ptr.Deref(g.Replicas, 1)
	minReplicas := ptr.Deref(g.MinReplicas, 0)
	maxReplicas := ptr.Deref(g.MaxReplicas, max(replicas, 1))
	if replicas < 0 || minReplicas < 0 || maxReplicas < 0 {
		return rayv1.WorkerGroupSpec{}, invalid("replicas", "replicas, min_replicas and max_replicas must not be negative")
	}
	if minReplicas > maxReplicas {
		return rayv1.WorkerGroupSpec{}, invalid("min_replicas", "%d is above max_replicas %d", minReplicas, maxReplicas)
	}
	if replicas < minReplicas || replicas > maxReplicas {
		return rayv1.WorkerGroupSpec{}, invalid("replicas", "%d is outside [min_replicas %d, max_replicas %d]", replicas, minReplicas, maxReplicas)
	}
	selector := maps.Clone(g.NodeSelector)
	if g.NodeHostname != "" {
		if selector == nil {
			selector = map[string]string{}
		}
		selector[corev1.LabelHostname] = g.NodeHostname
	}
	tolerations := slices.Clone(g.Tolerations)
	if g.GPUs > 0 && len(tolerations) == 0 {
		tolerations = []corev1.Toleration{{Key: gpuName, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	}
	image := g.Image
	if image == "" {
		image = DefaultImage
	}
	return rayv1.WorkerGroupSpec{
		GroupName:      g.Name,
		Replicas:       ptr.To(replicas),
		MinReplicas:    ptr.To(minReplicas),
		MaxReplicas:    ptr.To(maxReplicas),
		RayStartParams: nonNil(g.RayStartParams),
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: maps.Clone(g.Labels)},
			Spec: corev1.PodSpec{
				NodeSelector: selector,
				Tolerations:  tolerations,
				Containers: []corev1.Container{{
					Name: "ray-worker", Image: image, Resources: res, Env: envList(g.Env),
				}},
			},
		},
	}, nil
}

func resources(prefix, cpu, memory string, gpus int, gpuName string) (corev1.ResourceRequirements, error) {
	field := func(f string) string {
		if prefix == "" {
			return f
		}
		return prefix + "." + f
	}
	if cpu == "" {
		cpu = DefaultCPU
	}
	if memory == "" {
		memory = DefaultMemory
	}
	cpuQ, err := resource.ParseQuantity(cpu)
	if err != nil || cpuQ.Sign() <= 0 {
		return corev1.ResourceRequirements{}, invalid(field("cpu"), "%q is not a positive quantity like 2 or 500m", cpu)
	}
	memQ, err := resource.ParseQuantity(memory)
	if err != nil || memQ.Sign() <= 0 {
		return corev1.ResourceRequirements{}, invalid(field("memory"), "%q is not a positive quantity like 4Gi", memory)
	}
	list := corev1.ResourceList{corev1.ResourceCPU: cpuQ, corev1.ResourceMemory: memQ}
	if gpus > 0 {
		list[corev1.ResourceName(gpuName)] = *resource.NewQuantity(int64(gpus), resource.DecimalSI)
	}
	return corev1.ResourceRequirements{Requests: list, Limits: list.DeepCopy()}, nil
}

func envList(env map[string]string) []corev1.EnvVar {
	if len(env) == 0 {
		return nil
	}
	names := slices.Sorted(maps.Keys(env))
	out := make([]corev1.EnvVar, 0, len(names))
	for _, n := range names {
		out = append(out, corev1.EnvVar{Name: n, Value: env[n]})
	}
	return out
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return maps.Clone(m)
}

func placeholderHeadTemplate() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "ray-head", Image: DefaultImage}}}}
}

func placeholderMeta() metav1.ObjectMeta { return metav1.ObjectMeta{Name: "validation"} }
