package manifest

import (
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// ChartValues are the values of the RayService chart: one
// RayService running Ray Serve, Services of its own that reach the head
// from install time, optional external exposure, and two conditional
// injections (an organisation CA bundle; a GPU toleration).
type ChartValues struct {
	// Name names the RayService and prefixes its Services; default: the
	// release's name.
	Name string `json:"name,omitempty" schema:"dns1035;orEmpty;maxLength=40"`
	// Namespace is where every object goes; default: the release's.
	Namespace  string `json:"namespace,omitempty" schema:"dns1123label;orEmpty"`
	Image      string `json:"image,omitempty"`
	RayVersion string `json:"rayVersion,omitempty"` // default: the image tag's version
	Serve      struct {
		// Enabled exposes the Serve endpoint externally (it is always
		// reachable in-cluster through the chart's serve Service).
		Enabled       bool   `json:"enabled,omitempty"`
		ProxyLocation string `json:"proxyLocation,omitempty" schema:"enum=|EveryNode|HeadOnly|Disabled"` // default EveryNode
	} `json:"serve,omitempty"`
	ServeApplications []map[string]any `json:"serveApplications,omitempty"`
	Head              struct {
		Resources      corev1.ResourceRequirements `json:"resources,omitempty"`
		RayStartParams map[string]string           `json:"rayStartParams,omitempty"`
		Tolerations    []corev1.Toleration         `json:"tolerations,omitempty"`
	} `json:"head,omitempty"`
	Worker struct {
		Replicas       *int32                      `json:"replicas,omitempty"`
		MinReplicas    *int32                      `json:"minReplicas,omitempty"`
		MaxReplicas    *int32                      `json:"maxReplicas,omitempty"`
		Resources      corev1.ResourceRequirements `json:"resources,omitempty"`
		RayStartParams map[string]string           `json:"rayStartParams,omitempty"`
		Tolerations    []corev1.Toleration         `json:"tolerations,omitempty"`
	} `json:"worker,omitempty"`
	// Autoscaling runs KubeRay's in-tree autoscaler (v2) beside the head:
	// the worker group grows and shrinks with Ray's demand between
	// worker.minReplicas and worker.maxReplicas.
	Autoscaling struct {
		Enabled bool `json:"enabled,omitempty"`
		// IdleTimeoutSeconds is how long a worker stays idle before it is
		// removed; default KubeRay's (60).
		IdleTimeoutSeconds *int32 `json:"idleTimeoutSeconds,omitempty" schema:"minimum=0"`
		// UpscalingMode is Default, Aggressive or Conservative (KubeRay's).
		UpscalingMode string `json:"upscalingMode,omitempty" schema:"enum=|Default|Aggressive|Conservative"`
	} `json:"autoscaling,omitempty"`
	OrgCABundle struct {
		ConfigMapName string `json:"configMapName,omitempty"`
		Key           string `json:"key,omitempty"`   // default ca.crt
		Image         string `json:"image,omitempty"` // default alpine:3.20
	} `json:"orgCABundle,omitempty"`
	Exposure struct {
		// Type is "" (none), "httproute" (Gateway API) or "nebariapp".
		Type              string `json:"type,omitempty" schema:"enum=|httproute|nebariapp"`
		DashboardHostname string `json:"dashboardHostname,omitempty"`
		ServeHostname     string `json:"serveHostname,omitempty"`
		// Gateway is the Gateway an HTTPRoute attaches to (name required),
		// or the gateway a NebariApp routes through (name; default public).
		Gateway struct {
			Name        string `json:"name,omitempty"`
			Namespace   string `json:"namespace,omitempty"`
			SectionName string `json:"sectionName,omitempty"`
		} `json:"gateway,omitempty"`
		// Auth requires OIDC at the gateway (NebariApp only).
		Auth bool `json:"auth,omitempty"`
	} `json:"exposure,omitempty"`
	// NetworkPolicy, when enabled, scopes who reaches the head: the Ray
	// client port (10001: whoever reaches it runs code on the cluster) only
	// from the namespaces and pods named, the dashboard, Serve and metrics
	// ports from anywhere, everything from the RayService's own pods.
	NetworkPolicy struct {
		Enabled bool `json:"enabled,omitempty"`
		// ClientNamespaces may reach the Ray client port (every pod in them).
		ClientNamespaces []string `json:"clientNamespaces,omitempty" schema:"dns1123label"`
		// ClientPodLabels select pods of the chart's namespace that may
		// reach the Ray client port.
		ClientPodLabels map[string]string `json:"clientPodLabels,omitempty"`
	} `json:"networkPolicy,omitempty"`
}

// Chart defaults.
const (
	// DefaultNebariGateway is the gateway a NebariApp routes through when
	// exposure.gateway.name is not set.
	DefaultNebariGateway = "public"
	DefaultChartImage    = "rayproject/ray:2.54.0-py312"
	DefaultCAImage       = "alpine:3.20"
	caBundlePath         = "/shared/ca-bundle.crt"
)

// ParseChartValues decodes chart values strictly (unknown or mistyped
// fields are *SpecError with path and line) and checks them.
func ParseChartValues(file string, data []byte) (*ChartValues, error) {
	v := &ChartValues{}
	if err := decodeStrict(file, data, v, nil); err != nil {
		return nil, err
	}
	bad := func(path, format string, args ...any) error {
		return &SpecError{File: file, Path: path, Problem: fmt.Sprintf(format, args...)}
	}
	if err := checkChartName(v.Name); v.Name != "" && err != "" {
		return nil, bad("name", "%s", err)
	}
	if errs := validation.IsDNS1123Label(v.Namespace); v.Namespace != "" && len(errs) > 0 {
		return nil, bad("namespace", "%q: %s", v.Namespace, errs[0])
	}
	if pl := v.Autoscaling.UpscalingMode; pl != "" && !slices.Contains([]string{"Default", "Aggressive", "Conservative"}, pl) {
		return nil, bad("autoscaling.upscalingMode", "%q: want Default, Aggressive or Conservative", pl)
	}
	if t := v.Autoscaling.IdleTimeoutSeconds; t != nil && *t < 0 {
		return nil, bad("autoscaling.idleTimeoutSeconds", "%d: want 0 or more", *t)
	}
	if pl := v.Serve.ProxyLocation; pl != "" && !slices.Contains([]string{"EveryNode", "HeadOnly", "Disabled"}, pl) {
		return nil, bad("serve.proxyLocation", "%q: want EveryNode, HeadOnly or Disabled", pl)
	}
	for i, app := range v.ServeApplications {
		if _, ok := app["import_path"].(string); !ok {
			return nil, bad(fmt.Sprintf("serveApplications[%d].import_path", i), "is required")
		}
	}
	switch v.Exposure.Type {
	case "":
	case "httproute", "nebariapp":
		if v.Exposure.DashboardHostname == "" {
			return nil, bad("exposure.dashboardHostname", "is required to expose the dashboard")
		}
		if v.Serve.Enabled && v.Exposure.ServeHostname == "" {
			return nil, bad("exposure.serveHostname", "is required when serve.enabled is true")
		}
		if v.Exposure.Type == "httproute" && v.Exposure.Gateway.Name == "" {
			return nil, bad("exposure.gateway.name", "is required for an HTTPRoute")
		}
	default:
		return nil, bad("exposure.type", "%q: want httproute or nebariapp (or leave it empty)", v.Exposure.Type)
	}
	if np := v.NetworkPolicy; np.Enabled && len(np.ClientNamespaces) == 0 && len(np.ClientPodLabels) == 0 {
		return nil, bad("networkPolicy.clientNamespaces", "name the namespaces (or, in clientPodLabels, the pods) that may reach the Ray client port; with neither, nothing could")
	}
	for i, ns := range v.NetworkPolicy.ClientNamespaces {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return nil, bad(fmt.Sprintf("networkPolicy.clientNamespaces[%d]", i), "%q: %s", ns, errs[0])
		}
	}
	if v.Exposure.Auth && v.Exposure.Type == "httproute" {
		return nil, bad("exposure.auth", "OIDC at the gateway is configured by a NebariApp; use type nebariapp or your Gateway's own policy")
	}
	return v, nil
}

// checkChartName says what is wrong with a RayService name ("" when
// nothing is).
func checkChartName(name string) string {
	if errs := validation.IsDNS1035Label(name); len(errs) > 0 || len(name) > 40 {
		return fmt.Sprintf("%q must be a DNS-1035 label of at most 40 characters (it prefixes Service names)", name)
	}
	return ""
}

// ChartRelease is what Helm calls the release: its name and namespace
// are the defaults of the values' name and namespace.
type ChartRelease struct {
	Name      string
	Namespace string // default "default", as Helm's
}

// LoadChartValues reads and parses a values file.
func LoadChartValues(path string) (*ChartValues, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseChartValues(path, data)
}

var imageVersion = regexp.MustCompile(`:(\d+\.\d+\.\d+)`)

// RayServiceLabel marks the pods of a chart's RayService with its name;
// the chart's Services select the head by it.
const RayServiceLabel = "gridweave.dev/rayservice"

// RenderChart renders the chart as Helm does for release: the dashboard
// and serve Services (named <name>-dashboard and <name>-serve, never
// KubeRay's own <name>-head-svc and <name>-serve-svc, which its RayService
// controller overwrites), the RayService, then the exposure objects. The
// values' name and namespace default to the release's. The two injections
// render nothing unless asked for.
func RenderChart(values *ChartValues, release ChartRelease) ([]*unstructured.Unstructured, error) {
	v := *values
	v.Name = orDefault(v.Name, release.Name)
	v.Namespace = orDefault(v.Namespace, orDefault(release.Namespace, "default"))
	if v.Name == "" {
		return nil, &SpecError{Path: "name", Problem: "is required when the release has no name"}
	}
	if err := checkChartName(v.Name); err != "" {
		return nil, &SpecError{Path: "name", Problem: err + "; the release's name is the default, set name to another"}
	}
	if errs := validation.IsDNS1123Label(v.Namespace); len(errs) > 0 {
		return nil, &SpecError{Path: "namespace", Problem: fmt.Sprintf("%q: %s", v.Namespace, errs[0])}
	}
	image := orDefault(v.Image, DefaultChartImage)
	rayVersion := v.RayVersion
	if rayVersion == "" {
		if m := imageVersion.FindStringSubmatch(image); m != nil {
			rayVersion = m[1]
		}
	}
	ignoreExtraneous := map[string]string{"argocd.argoproj.io/compare-options": "IgnoreExtraneous"}
	lbls := map[string]string{"app.kubernetes.io/name": "rayserve", "app.kubernetes.io/instance": v.Name, "app.kubernetes.io/managed-by": ManagedBy}
	// KubeRay puts its ray.io/originated-from-* labels on the RayCluster,
	// not on the pods, and names the cluster <name>-<hash>; so the pods
	// carry a label of ours, and ray.io/node-type (set by KubeRay, not
	// overridable) picks the head.
	podLabels := map[string]string{RayServiceLabel: v.Name}
	headSelector := map[string]string{RayServiceLabel: v.Name, "ray.io/node-type": "head"}
	service := func(name string, ports ...corev1.ServicePort) *corev1.Service {
		return &corev1.Service{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: v.Namespace, Labels: lbls, Annotations: ignoreExtraneous},
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Selector: headSelector, Ports: ports},
		}
	}
	port := func(name string, p int32) corev1.ServicePort {
		return corev1.ServicePort{Name: name, Port: p, TargetPort: intstr.FromInt32(p), Protocol: corev1.ProtocolTCP}
	}
	dashboardSvc := service(v.Name+"-dashboard", port("dashboard", 8265), port("client", 10001))
	serveSvc := service(v.Name+"-serve", port("serve", 8000))

	apps := v.ServeApplications
	if apps == nil {
		apps = []map[string]any{}
	}
	serveConfig, err := yaml.Marshal(map[string]any{
		"proxy_location": orDefault(v.Serve.ProxyLocation, "EveryNode"),
		// 0.0.0.0: without it the proxy binds loopback and nothing outside
		// the pod reaches it.
		"http_options": map[string]any{"host": "0.0.0.0", "port": 8000},
		"applications": apps,
	})
	if err != nil {
		return nil, err
	}
	head := corev1.PodSpec{
		Tolerations: slices.Clone(v.Head.Tolerations),
		Containers: []corev1.Container{{
			Name: "ray-head", Image: image, Resources: v.Head.Resources,
			Ports: []corev1.ContainerPort{
				{Name: "gcs", ContainerPort: 6379}, {Name: "dashboard", ContainerPort: 8265},
				{Name: "client", ContainerPort: 10001}, {Name: "serve", ContainerPort: 8000},
			},
		}},
	}
	// A worker is ready when its raylet is: the serve Service routes to
	// the head only, so a worker's Serve proxy has no say (KubeRay's default
	// probe of a RayService's worker waits for it too).
	rayletHealthy := &corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"bash", "-c",
		"wget -T 2 -q -O- http://localhost:52365/api/local_raylet_healthz | grep success"}}}
	worker := corev1.PodSpec{
		Tolerations: slices.Clone(v.Worker.Tolerations),
		Containers: []corev1.Container{{Name: "ray-worker", Image: image, Resources: v.Worker.Resources,
			ReadinessProbe: &corev1.Probe{ProbeHandler: *rayletHealthy, InitialDelaySeconds: 10, PeriodSeconds: 5, TimeoutSeconds: 2, FailureThreshold: 10},
			LivenessProbe:  &corev1.Probe{ProbeHandler: *rayletHealthy, InitialDelaySeconds: 30, PeriodSeconds: 5, TimeoutSeconds: 2, FailureThreshold: 120},
		}},
	}
	for _, spec := range []*corev1.PodSpec{&head, &worker} {
		injectGPUToleration(spec)
		if v.OrgCABundle.ConfigMapName != "" {
			injectCABundle(spec, &v)
		}
	}
	replicas := ptr.Deref(v.Worker.Replicas, 1)
	svc := &rayv1.RayService{
		TypeMeta:   metav1.TypeMeta{APIVersion: rayv1.GroupVersion.String(), Kind: "RayService"},
		ObjectMeta: metav1.ObjectMeta{Name: v.Name, Namespace: v.Namespace, Labels: lbls, Annotations: ignoreExtraneous},
		Spec: rayv1.RayServiceSpec{
			ServeConfigV2: string(serveConfig),
			RayClusterSpec: rayv1.RayClusterSpec{
				RayVersion:              rayVersion,
				EnableInTreeAutoscaling: autoscaling(&v),
				AutoscalerOptions:       autoscalerOptions(&v),
				HeadGroupSpec: rayv1.HeadGroupSpec{
					RayStartParams: nonNilMap(v.Head.RayStartParams),
					Template:       corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: podLabels}, Spec: head},
				},
				WorkerGroupSpecs: []rayv1.WorkerGroupSpec{{
					GroupName:      "workers",
					Replicas:       ptr.To(replicas),
					MinReplicas:    ptr.To(ptr.Deref(v.Worker.MinReplicas, replicas)),
					MaxReplicas:    ptr.To(ptr.Deref(v.Worker.MaxReplicas, replicas)),
					RayStartParams: nonNilMap(v.Worker.RayStartParams),
					Template:       corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: maps.Clone(podLabels)}, Spec: worker},
				}},
			},
		},
	}
	objs := []*unstructured.Unstructured{}
	for _, o := range []runtime.Object{dashboardSvc, serveSvc, svc} {
		u, err := toUnstructured(o)
		if err != nil {
			return nil, err
		}
		objs = append(objs, u)
	}
	objs = append(objs, exposure(&v, dashboardSvc.Name, serveSvc.Name, lbls)...)
	if v.NetworkPolicy.Enabled {
		u, err := toUnstructured(headPolicy(&v, headSelector, podLabels, lbls))
		if err != nil {
			return nil, err
		}
		objs = append(objs, u)
	}
	return objs, nil
}

// autoscaling is the RayCluster's enableInTreeAutoscaling: true when
// asked for, left out otherwise.
func autoscaling(v *ChartValues) *bool {
	if !v.Autoscaling.Enabled {
		return nil
	}
	return ptr.To(true)
}

// autoscalerOptions are the autoscaler's settings: version v2 named (not
// left to a default that changes with KubeRay's version) and what the
// values name.
func autoscalerOptions(v *ChartValues) *rayv1.AutoscalerOptions {
	a := v.Autoscaling
	if !a.Enabled {
		return nil
	}
	opts := &rayv1.AutoscalerOptions{Version: ptr.To(rayv1.AutoscalerVersionV2), IdleTimeoutSeconds: a.IdleTimeoutSeconds}
	if a.UpscalingMode != "" {
		opts.UpscalingMode = ptr.To(rayv1.UpscalingMode(a.UpscalingMode))
	}
	return opts
}

// headPolicy is the opt-in NetworkPolicy of the head pod: the Ray client
// port from the namespaces and pods named only.
func headPolicy(v *ChartValues, head, own, lbls map[string]string) *networkingv1.NetworkPolicy {
	tcp := func(p int32) networkingv1.NetworkPolicyPort {
		return networkingv1.NetworkPolicyPort{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(p))}
	}
	var clients []networkingv1.NetworkPolicyPeer
	if ns := v.NetworkPolicy.ClientNamespaces; len(ns) > 0 {
		clients = append(clients, networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: slices.Clone(ns)}}}})
	}
	if pl := v.NetworkPolicy.ClientPodLabels; len(pl) > 0 {
		clients = append(clients, networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: maps.Clone(pl)}})
	}
	return &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: v.Name + "-head", Namespace: v.Namespace, Labels: lbls},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: maps.Clone(head)},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{
				// The cluster's own pods: GCS, object transfers, everything.
				{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: maps.Clone(own)}}}},
				// The dashboard, Serve and metrics: the gateway, Prometheus.
				{Ports: []networkingv1.NetworkPolicyPort{tcp(8265), tcp(8000), tcp(8080)}},
				// The Ray client: whoever reaches it runs code on the cluster.
				{From: clients, Ports: []networkingv1.NetworkPolicyPort{tcp(10001)}},
			},
		},
	}
}

func nonNilMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// injectGPUToleration adds the nvidia.com/gpu toleration to a pod spec
// whose container requests or limits a GPU, unless one with that key is
// already there.
func injectGPUToleration(spec *corev1.PodSpec) {
	wants := false
	for _, c := range spec.Containers {
		if _, ok := c.Resources.Limits[GPUResource]; ok {
			wants = true
		}
		if _, ok := c.Resources.Requests[GPUResource]; ok {
			wants = true
		}
	}
	if !wants {
		return
	}
	for _, t := range spec.Tolerations {
		if t.Key == string(GPUResource) {
			return
		}
	}
	spec.Tolerations = append(spec.Tolerations, corev1.Toleration{Key: string(GPUResource), Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
}

// injectCABundle builds a CA bundle (the system store plus the
// organisation's CA from a ConfigMap) in an init container with its own
// resources and a restricted securityContext, and points the usual
// variables of the Ray container at it.
func injectCABundle(spec *corev1.PodSpec, v *ChartValues) {
	key := orDefault(v.OrgCABundle.Key, "ca.crt")
	small := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}
	spec.InitContainers = append(spec.InitContainers, corev1.Container{
		Name:    "build-ca-bundle",
		Image:   orDefault(v.OrgCABundle.Image, DefaultCAImage),
		Command: []string{"sh", "-c", "cat /etc/ssl/certs/ca-certificates.crt /org-ca/" + key + " > " + caBundlePath},
		Resources: corev1.ResourceRequirements{
			Requests: small,
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		},
		SecurityContext: &corev1.SecurityContext{
			RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65534),
			AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
			Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		VolumeMounts: []corev1.VolumeMount{{Name: "ca-bundle", MountPath: "/shared"}, {Name: "org-ca", MountPath: "/org-ca", ReadOnly: true}},
	})
	spec.Volumes = append(spec.Volumes,
		corev1.Volume{Name: "ca-bundle", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		corev1.Volume{Name: "org-ca", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: v.OrgCABundle.ConfigMapName}}}},
	)
	c := &spec.Containers[0]
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "ca-bundle", MountPath: "/shared", ReadOnly: true})
	for _, name := range []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO"} {
		c.Env = append(c.Env, corev1.EnvVar{Name: name, Value: caBundlePath})
	}
}

func exposure(v *ChartValues, dashboardSvc, serveSvc string, lbls map[string]string) []*unstructured.Unstructured {
	type target struct {
		name, host, svc string
		port            int64
	}
	targets := []target{{v.Name + "-dashboard", v.Exposure.DashboardHostname, dashboardSvc, 8265}}
	if v.Serve.Enabled {
		targets = append(targets, target{v.Name + "-serve", v.Exposure.ServeHostname, serveSvc, 8000})
	}
	meta := func(name string) map[string]any {
		l := map[string]any{}
		for k, val := range lbls {
			l[k] = val
		}
		return map[string]any{"name": name, "namespace": v.Namespace, "labels": l}
	}
	var out []*unstructured.Unstructured
	for _, t := range targets {
		switch v.Exposure.Type {
		case "httproute":
			parent := map[string]any{"name": v.Exposure.Gateway.Name}
			if v.Exposure.Gateway.Namespace != "" {
				parent["namespace"] = v.Exposure.Gateway.Namespace
			}
			if v.Exposure.Gateway.SectionName != "" {
				parent["sectionName"] = v.Exposure.Gateway.SectionName
			}
			out = append(out, &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute", "metadata": meta(t.name),
				"spec": map[string]any{
					"parentRefs": []any{parent},
					"hostnames":  []any{t.host},
					"rules": []any{map[string]any{
						"matches":     []any{map[string]any{"path": map[string]any{"type": "PathPrefix", "value": "/"}}},
						"backendRefs": []any{map[string]any{"name": t.svc, "port": t.port}},
					}},
				},
			}})
		case "nebariapp":
			out = append(out, &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "reconcilers.nebari.dev/v1", "kind": "NebariApp", "metadata": meta(t.name),
				"spec": map[string]any{
					"hostname": t.host,
					"service":  map[string]any{"name": t.svc, "port": t.port, "namespace": v.Namespace},
					"routing":  map[string]any{"routes": []any{map[string]any{"pathPrefix": "/", "pathType": "PathPrefix"}}},
					"auth":     map[string]any{"enabled": v.Exposure.Auth},
					"gateway":  orDefault(v.Exposure.Gateway.Name, DefaultNebariGateway),
				},
			}})
		}
	}
	return out
}
