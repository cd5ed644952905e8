package manifest

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	k8sjson "k8s.io/apimachinery/pkg/util/json"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// Defaults of the launcher's rendering.
const (
	DefaultFleetResourcePrefix = "dockyard_fleet_"
	DefaultFleetRoleEnv        = "DOCKYARD_FLEET_ROLE"
	SandboxURLsEnv             = "DOCKYARD_SANDBOX_URLS"
	NoUVRuntimeEnv             = "RAY_ENABLE_UV_RUN_RUNTIME_ENV"
	DefaultSandboxPort         = 9090
	DefaultRayVersion          = "2.54.0"
	GPUResource                = corev1.ResourceName("nvidia.com/gpu")
	ManagedBy                  = "gridweave"
)

// Render turns a recipe and an infra spec into Kubernetes objects in apply
// order: governance (ResourceQuota, LimitRange), the sandbox pool
// (Deployment, Service, NetworkPolicy, PodDisruptionBudget), then, by
// launch.mode, a RayJob, or a RayCluster (with its PodDisruptionBudget when
// enabled), each after its head's NetworkPolicy when it has GPU fleets, or
// nothing. The same inputs always give the same objects.
func Render(r *Recipe, in *Infra) ([]*unstructured.Unstructured, error) {
	image := ""
	if in.Launch.Mode != ModeAttach {
		backend, path := r.Inference.Backend, "inference.backend"
		if in.InferenceBackend != "" {
			backend, path = in.InferenceBackend, "inferenceBackend"
		}
		image = in.Images[backend]
		if image == "" {
			return nil, &SpecError{Path: path, Problem: fmt.Sprintf("%q has no image in the infra spec's images (have %s)", backend, strings.Join(sortedKeys(in.Images), ", "))}
		}
	}
	name := r.Name
	if in.Launch.ClusterName != "" {
		name = in.Launch.ClusterName
	}
	var objs []runtime.Object
	objs = append(objs, governance(name, in)...)
	sandboxObjs, sandboxURL := sandbox(name, in)
	objs = append(objs, sandboxObjs...)

	if in.Launch.Mode != ModeAttach {
		spec, err := clusterSpec(r, in, name, image, sandboxURL)
		if err != nil {
			return nil, err
		}
		headPolicy := headNetworkPolicy(name, in, spec)
		switch in.Launch.Mode {
		case ModeRayJob:
			job, err := rayJob(r, in, name, spec, sandboxURL)
			if err != nil {
				return nil, err
			}
			if headPolicy != nil {
				objs = append(objs, headPolicy)
			}
			objs = append(objs, job)
		case ModeBringup:
			if pdb := in.KubeRay.PDB; pdb != nil && ptr.Deref(pdb.Enabled, false) {
				objs = append(objs, rayPodDisruptionBudget(name, in.Namespace, spec, pdb))
			}
			if headPolicy != nil {
				objs = append(objs, headPolicy)
			}
			objs = append(objs, &rayv1.RayCluster{
				TypeMeta:   metav1.TypeMeta{APIVersion: rayv1.GroupVersion.String(), Kind: "RayCluster"},
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: in.Namespace, Labels: labels(name, "ray")},
				Spec:       *spec,
			})
		}
	}
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		u, err := toUnstructured(o)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

// rayPodLabels are the labels of the launch's Ray pods (KubeRay's own
// name a RayJob's cluster, whose name is not known before it runs): the
// head's NetworkPolicy selects them.
func rayPodLabels(instance string) map[string]string {
	return map[string]string{"app.kubernetes.io/instance": instance, "app.kubernetes.io/component": "ray"}
}

// wantsGPUs reports whether a worker group of the cluster asks for GPUs
// (its Ray container's limits): such a cluster's head is scoped and asks
// for a token.
func wantsGPUs(spec *rayv1.RayClusterSpec) bool {
	for _, g := range spec.WorkerGroupSpecs {
		if len(g.Template.Spec.Containers) > 0 {
			if _, gpu := g.Template.Spec.Containers[0].Resources.Limits[GPUResource]; gpu {
				return true
			}
		}
	}
	return false
}

// tokenAuthSupported reports whether Ray version v takes authOptions'
// token mode (2.52 or later); KubeRay refuses it otherwise.
func tokenAuthSupported(v string) bool {
	var major, minor int
	if _, err := fmt.Sscanf(v, "%d.%d", &major, &minor); err != nil {
		return false
	}
	return major > 2 || major == 2 && minor >= 52
}

// headNetworkPolicy is the head's NetworkPolicy of a cluster with GPU
// fleets (kuberay.headNetworkPolicy): everything from the launch's own
// Ray pods; the dashboard, Serve and metrics ports from anywhere (the
// API server's proxy, the RayJob's submitter, Prometheus); the Ray
// client port from the namespaces and pods named only. Nil when off.
func headNetworkPolicy(name string, in *Infra, spec *rayv1.RayClusterSpec) *networkingv1.NetworkPolicy {
	settings := in.KubeRay.HeadNetworkPolicy
	if !ptr.Deref(settings.Enabled, wantsGPUs(spec)) {
		return nil
	}
	tcp := func(p int32) networkingv1.NetworkPolicyPort {
		return networkingv1.NetworkPolicyPort{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(p))}
	}
	own := rayPodLabels(name)
	head := rayPodLabels(name)
	head["ray.io/node-type"] = "head"
	var clients []networkingv1.NetworkPolicyPeer
	if ns := settings.ClientNamespaces; len(ns) > 0 {
		clients = append(clients, networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: slices.Clone(ns)}}}})
	}
	if pl := settings.ClientPodLabels; len(pl) > 0 {
		clients = append(clients, networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: maps.Clone(pl)}})
	}
	ingress := []networkingv1.NetworkPolicyIngressRule{
		{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: own}}}},
		{Ports: []networkingv1.NetworkPolicyPort{tcp(8265), tcp(8000), tcp(8080)}},
	}
	if len(clients) > 0 {
		ingress = append(ingress, networkingv1.NetworkPolicyIngressRule{From: clients, Ports: []networkingv1.NetworkPolicyPort{tcp(10001)}})
	}
	return &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: name + "-head", Namespace: in.Namespace, Labels: labels(name, "ray")},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: head},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress:     ingress,
		},
	}
}

func labels(instance, component string) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":       "dockyard",
		"app.kubernetes.io/instance":   instance,
		"app.kubernetes.io/component":  component,
		"app.kubernetes.io/managed-by": ManagedBy,
	}
}

func governance(name string, in *Infra) []runtime.Object {
	var out []runtime.Object
	if q := in.Infra.ResourceQuota; q != nil && q.Enabled {
		out = append(out, &corev1.ResourceQuota{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ResourceQuota"},
			ObjectMeta: metav1.ObjectMeta{Name: name + "-quota", Namespace: in.Namespace, Labels: labels(name, "governance")},
			Spec:       corev1.ResourceQuotaSpec{Hard: resourceList(q.Hard)},
		})
	}
	if l := in.Infra.LimitRange; l != nil && l.Enabled {
		out = append(out, &corev1.LimitRange{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "LimitRange"},
			ObjectMeta: metav1.ObjectMeta{Name: name + "-limits", Namespace: in.Namespace, Labels: labels(name, "governance")},
			Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
				Type: corev1.LimitTypeContainer, Default: resourceList(l.Default), DefaultRequest: resourceList(l.DefaultRequest), Max: resourceList(l.Max),
			}}},
		})
	}
	return out
}

func resourceList(m map[string]string) corev1.ResourceList {
	if len(m) == 0 {
		return nil
	}
	out := corev1.ResourceList{}
	for k, v := range m {
		out[corev1.ResourceName(k)] = resource.MustParse(v) // validated by ParseInfra
	}
	return out
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// sandbox renders the executor pool and returns its URL for injection.
func sandbox(name string, in *Infra) ([]runtime.Object, string) {
	sb := in.Sandbox
	if !ptr.Deref(sb.Enabled, true) || sb.Image == "" {
		return nil, ""
	}
	svcName := name + "-sandbox"
	port := sb.Port
	if port == 0 {
		port = DefaultSandboxPort
	}
	selector := map[string]string{"app.kubernetes.io/instance": name, "app.kubernetes.io/component": "sandbox"}
	lbls := labels(name, "sandbox")
	req := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse(orDefault(sb.Resources.CPU, "1")),
		corev1.ResourceMemory:           resource.MustParse(orDefault(sb.Resources.Memory, "2Gi")),
		corev1.ResourceEphemeralStorage: resource.MustParse(orDefault(sb.Resources.EphemeralStorage, "10Gi")),
	}
	lim := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse(orDefault(sb.Resources.CPULimit, req.Cpu().String())),
		corev1.ResourceMemory:           resource.MustParse(orDefault(sb.Resources.MemoryLimit, req.Memory().String())),
		corev1.ResourceEphemeralStorage: resource.MustParse(orDefault(sb.Resources.EphemeralStorageLimit, req.StorageEphemeral().String())),
	}
	ctr := corev1.Container{
		Name:           "executor",
		Image:          sb.Image,
		Ports:          []corev1.ContainerPort{{Name: "http", ContainerPort: port, Protocol: corev1.ProtocolTCP}},
		Resources:      corev1.ResourceRequirements{Requests: req, Limits: lim},
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("http")}}, PeriodSeconds: 10},
	}
	if ptr.Deref(sb.Security.Enabled, true) {
		ctr.SecurityContext = &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		}
		if sb.Security.RunAsNonRoot {
			ctr.SecurityContext.RunAsNonRoot = ptr.To(true)
		}
		if sb.Security.ReadOnlyRootFilesystem {
			ctr.SecurityContext.ReadOnlyRootFilesystem = ptr.To(true)
		}
	}
	spread := sb.TopologySpreadConstraints
	if spread == nil {
		spread = []corev1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.ScheduleAnyway,
			LabelSelector: &metav1.LabelSelector{MatchLabels: selector},
		}}
	}
	deploy := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: svcName, Namespace: in.Namespace, Labels: lbls},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(ptr.Deref(sb.Replicas, 2)),
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbls},
				Spec: corev1.PodSpec{
					Containers:                   []corev1.Container{ctr},
					ImagePullSecrets:             pullSecrets(in.ImagePullSecrets),
					PriorityClassName:            in.Infra.PriorityClassName,
					TopologySpreadConstraints:    spread,
					AutomountServiceAccountToken: ptr.To(false),
				},
			},
		},
	}
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: svcName, Namespace: in.Namespace, Labels: lbls},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: selector,
			Ports:    []corev1.ServicePort{{Name: "http", Port: port, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP}},
		},
	}
	out := []runtime.Object{deploy, svc}
	if np := sb.NetworkPolicy; ptr.Deref(np.Enabled, true) {
		policy := &networkingv1.NetworkPolicy{
			TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
			ObjectMeta: metav1.ObjectMeta{Name: svcName, Namespace: in.Namespace, Labels: lbls},
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: selector},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
				Ingress: []networkingv1.NetworkPolicyIngressRule{{
					From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}},
					Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(port))}},
				}},
			},
		}
		// Egress is limited when it is turned off, and whenever CIDRs name
		// where it may go (to them and DNS): never more open than written.
		if !ptr.Deref(np.AllowEgress, true) || len(np.AllowedEgressCIDRs) > 0 {
			policy.Spec.PolicyTypes = append(policy.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
			dns := networkingv1.NetworkPolicyEgressRule{Ports: []networkingv1.NetworkPolicyPort{
				{Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To(intstr.FromInt32(53))},
				{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(53))},
			}}
			policy.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{dns}
			if len(np.AllowedEgressCIDRs) > 0 {
				rule := networkingv1.NetworkPolicyEgressRule{}
				for _, c := range np.AllowedEgressCIDRs {
					rule.To = append(rule.To, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: c}})
				}
				policy.Spec.Egress = append(policy.Spec.Egress, rule)
			}
		}
		out = append(out, policy)
	}
	if pdb := sb.PDB; ptr.Deref(pdb.Enabled, true) {
		maxUnavailable := pdb.MaxUnavailable
		if maxUnavailable == 0 {
			maxUnavailable = 1
		}
		out = append(out, podDisruptionBudget(svcName, in.Namespace, selector, maxUnavailable, lbls))
	}
	url := ""
	if sb.InjectURLs {
		url = fmt.Sprintf("http://%s.%s.svc.cluster.local:%d", svcName, in.Namespace, port)
	}
	return out, url
}

// rayPodDisruptionBudget keeps all but maxUnavailable of a RayCluster's
// pods up. It says so with an integer minAvailable: the disruption
// controller cannot count pods owned by a RayCluster (no scale
// subresource), so maxUnavailable or a percentage would refuse every
// eviction.
func rayPodDisruptionBudget(name, namespace string, spec *rayv1.RayClusterSpec, settings *PDBSettings) *policyv1.PodDisruptionBudget {
	minAvailable := ptr.Deref(settings.MinAvailable, -1)
	if minAvailable < 0 {
		pods := int32(1) // the head
		for _, g := range spec.WorkerGroupSpecs {
			pods += ptr.Deref(g.Replicas, 0) * max(1, g.NumOfHosts)
		}
		minAvailable = max(0, pods-max(1, settings.MaxUnavailable))
	}
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: metav1.ObjectMeta{Name: name + "-ray", Namespace: namespace, Labels: labels(name, "ray")},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(minAvailable)),
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"ray.io/cluster": name}},
		},
	}
}

func podDisruptionBudget(name, namespace string, selector map[string]string, maxUnavailable int32, lbls map[string]string) *policyv1.PodDisruptionBudget {
	if maxUnavailable == 0 {
		maxUnavailable = 1
	}
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: lbls},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(maxUnavailable)),
			Selector:       &metav1.LabelSelector{MatchLabels: selector},
		},
	}
}

func pullSecrets(names []string) []corev1.LocalObjectReference {
	var out []corev1.LocalObjectReference
	for _, n := range names {
		out = append(out, corev1.LocalObjectReference{Name: n})
	}
	return out
}

// rayEnv is the runtime invariants every Ray pod gets.
func rayEnv(sandboxURL string, extra ...corev1.EnvVar) []corev1.EnvVar {
	env := []corev1.EnvVar{{Name: NoUVRuntimeEnv, Value: "0"}}
	if sandboxURL != "" {
		env = append(env, corev1.EnvVar{Name: SandboxURLsEnv, Value: sandboxURL})
	}
	return append(env, extra...)
}

func clusterSpec(r *Recipe, in *Infra, name, image, sandboxURL string) (*rayv1.RayClusterSpec, error) {
	prefix := orDefault(in.KubeRay.FleetResourcePrefix, DefaultFleetResourcePrefix)
	roleEnv := orDefault(in.KubeRay.FleetRoleEnv, DefaultFleetRoleEnv)
	var security *corev1.SecurityContext
	if s := in.Infra.Security; s != nil && s.Enabled {
		security = &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			// Every capability goes; a named option adds back what it needs.
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		}
		if s.RunAsNonRoot {
			security.RunAsNonRoot = ptr.To(true)
		}
		if s.IPCLock {
			security.Capabilities.Add = append(security.Capabilities.Add, "IPC_LOCK")
		}
	}
	headRes := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi")}
	spec := &rayv1.RayClusterSpec{
		RayVersion: orDefault(in.KubeRay.RayVersion, DefaultRayVersion),
		HeadGroupSpec: rayv1.HeadGroupSpec{
			// The head schedules no GPU work.
			RayStartParams: map[string]string{"num-gpus": "0"},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				ImagePullSecrets:  pullSecrets(in.ImagePullSecrets),
				PriorityClassName: in.Infra.PriorityClassName,
				Containers: []corev1.Container{{
					Name: "ray-head", Image: image, Env: rayEnv(sandboxURL),
					Resources:       corev1.ResourceRequirements{Requests: headRes, Limits: headRes.DeepCopy()},
					SecurityContext: security,
				}},
			}},
		},
	}
	for _, role := range sortedKeys(r.Fleets) {
		f := r.Fleets[role]
		res := corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse(orDefault(f.CPU, "8")),
			corev1.ResourceMemory: resource.MustParse(orDefault(f.Memory, "64Gi")),
		}
		amount := max(f.GPUsPerNode, 1)
		tag, _ := json.Marshal(map[string]int32{prefix + role: amount})
		pod := corev1.PodSpec{
			ImagePullSecrets:  pullSecrets(in.ImagePullSecrets),
			PriorityClassName: orDefault(f.PriorityClassName, in.Infra.PriorityClassName),
			Containers: []corev1.Container{{
				Name: "ray-worker", Image: image,
				Env:             rayEnv(sandboxURL, corev1.EnvVar{Name: roleEnv, Value: role}),
				SecurityContext: security,
			}},
		}
		limits := res.DeepCopy()
		if f.GPUsPerNode > 0 {
			limits[GPUResource] = *resource.NewQuantity(int64(f.GPUsPerNode), resource.DecimalSI)
			pod.Tolerations = []corev1.Toleration{{Key: string(GPUResource), Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
		}
		pod.Containers[0].Resources = corev1.ResourceRequirements{Requests: limits.DeepCopy(), Limits: limits}
		minReplicas, maxReplicas := ptr.Deref(f.MinReplicas, f.Replicas), ptr.Deref(f.MaxReplicas, f.Replicas)
		if minReplicas != f.Replicas || maxReplicas != f.Replicas {
			// A fleet with a range is scaled by Ray's autoscaler (v2, in the
			// head pod), between its bounds, by the tasks that wait for it.
			spec.EnableInTreeAutoscaling = ptr.To(true)
			spec.AutoscalerOptions = &rayv1.AutoscalerOptions{Version: ptr.To(rayv1.AutoscalerVersionV2)}
		}
		spec.WorkerGroupSpecs = append(spec.WorkerGroupSpecs, rayv1.WorkerGroupSpec{
			GroupName:   role,
			Replicas:    ptr.To(f.Replicas),
			MinReplicas: ptr.To(minReplicas),
			MaxReplicas: ptr.To(maxReplicas),
			// Ray's resources flag takes JSON in single quotes.
			RayStartParams: map[string]string{"resources": "'" + string(tag) + "'"},
			Template:       corev1.PodTemplateSpec{Spec: pod},
		})
	}
	if len(in.KubeRay.Spec) == 0 {
		secureCluster(spec, name)
		return spec, nil
	}
	base, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	var merged map[string]any
	if err := json.Unmarshal(base, &merged); err != nil {
		return nil, err
	}
	mergePatch(merged, in.KubeRay.Spec)
	data, err := json.Marshal(merged)
	if err != nil {
		return nil, err
	}
	out := &rayv1.RayClusterSpec{}
	if err := json.Unmarshal(data, out); err != nil {
		return nil, &SpecError{Path: "kuberay.spec", Problem: err.Error()}
	}
	secureCluster(out, name)
	return out, nil
}

// secureCluster finishes a cluster spec as kuberay.spec left it: every
// Ray pod (a group kuberay.spec added too) carries the launch's labels,
// which the head's NetworkPolicy lets in; and a cluster with GPU fleets
// whose Ray takes tokens (2.52 or later) asks for one, unless its
// authOptions say otherwise (mode: disabled). Whoever reaches the
// dashboard submits code: Ray then wants the cluster's token (KubeRay
// makes it, in a Secret named after the cluster).
func secureCluster(spec *rayv1.RayClusterSpec, name string) {
	templates := []*corev1.PodTemplateSpec{&spec.HeadGroupSpec.Template}
	for i := range spec.WorkerGroupSpecs {
		templates = append(templates, &spec.WorkerGroupSpecs[i].Template)
	}
	for _, t := range templates {
		if t.Labels == nil {
			t.Labels = map[string]string{}
		}
		maps.Copy(t.Labels, rayPodLabels(name))
	}
	if wantsGPUs(spec) && spec.AuthOptions == nil && tokenAuthSupported(spec.RayVersion) {
		spec.AuthOptions = &rayv1.AuthOptions{Mode: rayv1.AuthModeToken}
	}
}

// mergeKeys are the lists kuberay.spec merges item by item, as
// Kubernetes' strategic merge does, by the field that names an item; any
// other list is replaced.
var mergeKeys = map[string]string{
	"workerGroupSpecs": "groupName",
	"containers":       "name", "initContainers": "name", "env": "name", "volumes": "name",
	"volumeMounts": "mountPath", "ports": "containerPort", "imagePullSecrets": "name",
}

// mergePatch applies patch to target as a strategic merge: mappings
// merge, null deletes, the lists of mergeKeys merge by their key (an item
// whose key is new is added), every other value (other lists included)
// replaces.
func mergePatch(target, patch map[string]any) {
	for k, v := range patch {
		if v == nil {
			delete(target, k)
			continue
		}
		if key, ok := mergeKeys[k]; ok {
			if pl, ok := v.([]any); ok {
				if tl, ok := target[k].([]any); ok {
					target[k] = mergeList(tl, pl, key)
					continue
				}
			}
		}
		if pm, ok := v.(map[string]any); ok {
			if tm, ok := target[k].(map[string]any); ok {
				mergePatch(tm, pm)
				continue
			}
			fresh := map[string]any{}
			mergePatch(fresh, pm)
			target[k] = fresh
			continue
		}
		target[k] = v
	}
}

// mergeList merges patch into target item by item, by key.
func mergeList(target, patch []any, key string) []any {
	out := append([]any(nil), target...)
	for _, p := range patch {
		pm, ok := p.(map[string]any)
		id, hasID := pm[key]
		if !ok || !hasID {
			out = append(out, p)
			continue
		}
		i := slices.IndexFunc(out, func(t any) bool {
			tm, ok := t.(map[string]any)
			return ok && fmt.Sprint(tm[key]) == fmt.Sprint(id)
		})
		if i < 0 {
			fresh := map[string]any{}
			mergePatch(fresh, pm)
			out = append(out, fresh)
			continue
		}
		mergePatch(out[i].(map[string]any), pm)
	}
	return out
}

// JobEntrypoint is the shell command a launch's job runs: the recipe's
// entrypoint and its overrides, each quoted; when the sandbox URLs are
// injected (sandboxURL not empty), an override that lets the injected
// variable win over the recipe's localhost default. A RayJob and a job
// submitted to an existing cluster run the same command.
func JobEntrypoint(r *Recipe, sandboxURL string) string {
	entrypoint := r.Entrypoint
	overrides := r.Overrides
	if sandboxURL != "" && !hasOverride(overrides, "env.code.sandbox_urls") {
		overrides = append(append([]string(nil), overrides...), "env.code.sandbox_urls=null")
	}
	for _, o := range overrides {
		entrypoint += " " + shellQuote(o)
	}
	return entrypoint
}

func rayJob(r *Recipe, in *Infra, name string, spec *rayv1.RayClusterSpec, sandboxURL string) (*rayv1.RayJob, error) {
	entrypoint := JobEntrypoint(r, sandboxURL)
	job := &rayv1.RayJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: rayv1.GroupVersion.String(), Kind: "RayJob"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: in.Namespace, Labels: labels(name, "ray")},
		Spec: rayv1.RayJobSpec{
			Entrypoint:                entrypoint,
			ShutdownAfterJobFinishes:  true,
			TTLSecondsAfterFinished:   ptr.Deref(in.Launch.TTLSecondsAfterFinished, 600),
			BackoffLimit:              in.Launch.BackoffLimit,
			ActiveDeadlineSeconds:     in.Launch.ActiveDeadlineSeconds,
			PreRunningDeadlineSeconds: in.Launch.PreRunningDeadlineSeconds,
			SubmissionMode:            rayv1.JobSubmissionMode(in.Launch.SubmissionMode),
			RayClusterSpec:            spec,
		},
	}
	if s := in.Launch.SubmitterConfig; s != nil {
		job.Spec.SubmitterConfig = &rayv1.SubmitterConfig{BackoffLimit: s.BackoffLimit}
	}
	if r.RuntimeEnv != nil {
		env, err := yaml.Marshal(r.RuntimeEnv)
		if err != nil {
			return nil, err
		}
		job.Spec.RuntimeEnvYAML = string(env)
	}
	return job, nil
}

func hasOverride(overrides []string, key string) bool {
	for _, o := range overrides {
		if strings.HasPrefix(o, key+"=") {
			return true
		}
	}
	return false
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '_' || r == '-' || r == '.' || r == '=' || r == '/' || r == ',' || r == ':' || r == '+' ||
			(r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9'))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}

// toUnstructured converts a typed object and drops what a render must not
// carry: status and the zero creationTimestamps of metadata and templates.
// It goes through JSON (integers read back as int64, as unstructured
// objects hold them) rather than runtime.DefaultUnstructuredConverter,
// whose field cache is rebuilt for every new field it meets: a first
// render met some thousand fields and spent 20 ms there.
func toUnstructured(o runtime.Object) (*unstructured.Unstructured, error) {
	data, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := k8sjson.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	delete(m, "status")
	dropNullTimestamps(m)
	return &unstructured.Unstructured{Object: m}, nil
}

func dropNullTimestamps(v any) {
	switch t := v.(type) {
	case map[string]any:
		if ts, ok := t["creationTimestamp"]; ok && ts == nil {
			delete(t, "creationTimestamp")
		}
		for _, child := range t {
			dropNullTimestamps(child)
		}
		if meta, ok := t["metadata"].(map[string]any); ok && len(meta) == 0 {
			delete(t, "metadata")
		}
	case []any:
		for _, child := range t {
			dropNullTimestamps(child)
		}
	}
}

// Marshal writes objects as one multi-document YAML stream, in order.
func Marshal(objs []*unstructured.Unstructured) ([]byte, error) {
	var b strings.Builder
	for i, o := range objs {
		data, err := yaml.Marshal(o.Object)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			b.WriteString("---\n")
		}
		b.Write(data)
	}
	return []byte(b.String()), nil
}

// FileName is the name render -o DIR gives an object: its position, kind
// and name, so that a directory listing is the apply order.
func FileName(i int, o *unstructured.Unstructured) string {
	return fmt.Sprintf("%02d-%s-%s.yaml", i+1, strings.ToLower(o.GetKind()), o.GetName())
}
