package operator

import (
	"cmp"
	"fmt"
	"regexp"
	"strings"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"gridweave.dev/manifest/internal/yamlstream"
)

// Finding is what a rule found in an object.
type Finding struct {
	ID string
	// Error: KubeRay or the API server refuses it, or the operator
	// mishandles it; else a warning.
	Error   bool
	Path    string
	Message string
	Fix     string
	// EmbeddedIn is the string field a finding inside embedded YAML
	// (serveConfigV2) is in, and EmbeddedLine its line in that YAML.
	EmbeddedIn   string
	EmbeddedLine int
}

// APIServer is how the validation engine judges, with the API server's
// semantics, what the rules decode and what the operator would build.
type APIServer interface {
	// Decode decodes an object into a typed one as the API server's
	// decoding would take it (nil only when it would).
	Decode(obj map[string]any, into any) error
	// ServiceErrors and IngressErrors are the API server's checks of a
	// Service and an Ingress the operator would create.
	ServiceErrors(*corev1.Service) field.ErrorList
	IngressErrors(*networkingv1.Ingress) field.ErrorList
	// RestartPolicy is the API server's check of a pod template's restart
	// policy under an owner of kind (Job: OnFailure or Never).
	RestartPolicy(kind string, policy corev1.RestartPolicy, p *field.Path) *field.Error
}

var imageRayVersion = regexp.MustCompile(`(?:^|/)ray(?:-ml|-llm)?:(\d+\.\d+\.\d+)`)

// selectsRayPods reports whether a selector picks pods KubeRay created
// (it names one of their ray.io/ labels).
func selectsRayPods(sel *metav1.LabelSelector) bool {
	for k := range sel.MatchLabels {
		if strings.HasPrefix(k, "ray.io/") {
			return true
		}
	}
	for _, e := range sel.MatchExpressions {
		if strings.HasPrefix(e.Key, "ray.io/") {
			return true
		}
	}
	return false
}

// unboundedRayJob: a RayJob should say what ends it — a deadline once it
// runs, a deadline to reach running, how many retries a failure gets
// (those two only when it makes its own cluster) — rather than leave it
// to defaults that never end it. One finding names every bound missing.
func unboundedRayJob(j *rayv1.RayJob, warn func(id, path, msg, fix string)) {
	ownCluster := j.Spec.RayClusterSpec != nil && len(j.Spec.ClusterSelector) == 0
	var path string
	var missing, fixes []string
	if j.Spec.ActiveDeadlineSeconds == nil {
		path = "spec.activeDeadlineSeconds"
		missing = append(missing, "nothing ends it if it hangs (activeDeadlineSeconds)")
		fixes = append(fixes, "activeDeadlineSeconds (the job fails once it has run that long)")
	}
	if ownCluster && j.Spec.PreRunningDeadlineSeconds == nil {
		path = cmp.Or(path, "spec.preRunningDeadlineSeconds")
		missing = append(missing, "a cluster that never starts (pods Pending for GPUs, an image that never pulls) waits without end (preRunningDeadlineSeconds)")
		fixes = append(fixes, "preRunningDeadlineSeconds (it fails if not running by then)")
	}
	if ownCluster && j.Spec.BackoffLimit == nil {
		path = cmp.Or(path, "spec.backoffLimit")
		missing = append(missing, "one failure (a lost node, a preempted pod) ends it, by a default no one chose (backoffLimit)")
		fixes = append(fixes, "backoffLimit (each retry makes a new RayCluster; 0 when a failure must be final)")
	}
	if len(missing) > 0 {
		warn("rayjob-unbounded", path, "the job's bounds are left to defaults: "+strings.Join(missing, "; "), "set "+strings.Join(fixes, ", "))
	}
}

// KubeRayVersion is the KubeRay release whose operator these rules model
// (the module this package builds against).
const KubeRayVersion = "v1.6.0"

// alphaGated are RayClusterSpec fields of KubeRay releases after the one
// lint judges, each behind an alpha feature gate of the operator that is
// off by default.
var alphaGated = []struct{ field, what, gate, since string }{
	{"tlsOptions", "mTLS between the cluster's Ray processes (certificates from cert-manager)", "RayClusterMTLS", "v1.7"},
	{"networkPolicy", "the NetworkPolicies the operator makes for the cluster", "RayClusterNetworkPolicy", "v1.7"},
	{"historyServerOptions", "the History Server's event collector sidecar", "RayClusterHistoryServer", "v1.7"},
}

// alphaGateRules: a spec that relies on a feature behind an alpha gate
// gets nothing from it unless the operator runs with the gate on, and an
// operator of the release lint judges drops the field altogether (its
// schema has no such field: an unknown-field error says so too).
func alphaGateRules(c clusterContext, warn func(id, path, msg, fix string)) {
	for _, g := range alphaGated {
		if _, ok := c.raw[g.field]; !ok {
			continue
		}
		warn("alpha-feature-gate", c.prefix+g.field, fmt.Sprintf(
			"%s is %s, a KubeRay %s feature behind the operator's %s feature gate (alpha, off by default): without the gate the operator ignores it, and KubeRay %s (what this lint judges) has no such field",
			g.field, g.what, g.since, g.gate, KubeRayVersion),
			fmt.Sprintf("run KubeRay %s or later with --feature-gates=%s=true, or drop the field", g.since, g.gate))
	}
}

// Rules are the Ray-aware lint rules on one object (any kind; most are
// about ray.io objects, some about Services and PodDisruptionBudgets in
// front of Ray pods): questionable but accepted choices are warnings;
// what KubeRay would refuse or mishandle is an error. api judges what the
// operator would build, as the API server would.
func Rules(u *unstructured.Unstructured, api APIServer) []Finding {
	var out []Finding
	warn := func(id, path, msg, fix string) {
		out = append(out, Finding{ID: id, Path: path, Message: msg, Fix: fix})
	}
	fail := func(id, path, msg, fix string) {
		out = append(out, Finding{ID: id, Error: true, Path: path, Message: msg, Fix: fix})
	}
	fromUnstructured := api.Decode
	rawSpec := func(path ...string) map[string]any {
		m, _, _ := unstructured.NestedFieldNoCopy(u.Object, path...)
		raw, _ := m.(map[string]any)
		return raw
	}
	clusterRules := func(c clusterContext, spec *rayv1.RayClusterSpec) {
		if spec == nil {
			return
		}
		prefix, name := c.prefix, c.name
		c.annotations = u.GetAnnotations()
		alphaGateRules(c, warn)
		headServiceRules(c, spec, fail)
		serveServiceRules(c, spec, fail)
		pods, podsErr := operatorPods(spec) // built once, for the rules below
		if podsErr == nil {
			podRules(c, spec, pods, fail, warn)
		}
		headSelectorRules(c, spec, fail)
		ingressRules(c, spec, fail)
		autoscalerServiceAccountRules(c, spec, fail)
		faultToleranceRules(c, spec, fail, warn)
		serviceFieldRules(prefix+"headGroupSpec.headService", u.GetNamespace(), spec.HeadGroupSpec.HeadService, warn)
		groupRules(c, spec, fail, warn)
		if ptr.Deref(spec.EnableInTreeAutoscaling, false) && (spec.AutoscalerOptions == nil || spec.AutoscalerOptions.Version == nil) {
			warn("autoscaler-version", prefix+"autoscalerOptions.version", "autoscaling without an explicit autoscaler version follows a version-dependent default", "set autoscalerOptions.version: v2")
		}
		type group struct {
			path      string
			params    map[string]string
			resources map[string]string
			tmpl      corev1.PodTemplateSpec
		}
		groups := []group{{path: prefix + "headGroupSpec", params: spec.HeadGroupSpec.RayStartParams, resources: spec.HeadGroupSpec.Resources, tmpl: spec.HeadGroupSpec.Template}}
		if t := spec.HeadGroupSpec.ServiceType; t == corev1.ServiceTypeLoadBalancer || t == corev1.ServiceTypeNodePort {
			warn("exposed-dashboard", prefix+"headGroupSpec.serviceType", fmt.Sprintf("a %s head Service exposes the dashboard and job API (8265) and Ray client (10001) outside the cluster: anyone who reaches them can run code", t), "use ClusterIP and an authenticated gateway")
		}
		operatorRules(prefix, name, spec, fail, warn)
		for i, g := range spec.WorkerGroupSpecs {
			p := fmt.Sprintf("%sworkerGroupSpecs[%d]", prefix, i)
			groups = append(groups, group{path: p, params: g.RayStartParams, resources: g.Resources, tmpl: g.Template})
			r, lo, hi := ptr.Deref(g.Replicas, 0), ptr.Deref(g.MinReplicas, 0), ptr.Deref(g.MaxReplicas, 0)
			if g.MinReplicas != nil && g.MaxReplicas != nil && (r < lo || r > hi) {
				warn("replicas-out-of-range", p+".replicas", fmt.Sprintf("replicas %d is outside [minReplicas %d, maxReplicas %d]; KubeRay clamps it", r, lo, hi), "")
			}
		}
		for _, g := range groups {
			if len(g.resources) > 0 {
				for _, k := range []string{"num-cpus", "num-gpus", "memory", "resources"} {
					if _, ok := g.params[k]; ok {
						fail("resources-and-start-params", g.path+".rayStartParams."+k, "group resources and rayStartParams resource keys cannot be combined; KubeRay rejects the cluster", "keep one of them")
					}
				}
			}
			if len(g.tmpl.Spec.Containers) == 0 {
				continue
			}
			ctr := g.tmpl.Spec.Containers[0]
			cp := g.path + ".template.spec.containers[0]"
			if m := imageRayVersion.FindStringSubmatch(ctr.Image); m != nil && spec.RayVersion != "" && m[1] != spec.RayVersion {
				warn("ray-version-image", prefix+"rayVersion", fmt.Sprintf("rayVersion %s does not match the image %s (Ray %s); KubeRay picks features by rayVersion", spec.RayVersion, ctr.Image, m[1]), "set rayVersion to "+m[1])
			}
			for _, which := range []struct {
				name string
				list corev1.ResourceList
			}{{"requests", ctr.Resources.Requests}, {"limits", ctr.Resources.Limits}} {
				if cpu, ok := which.list[corev1.ResourceCPU]; ok && cpu.MilliValue()%1000 != 0 {
					if _, explicit := g.params["num-cpus"]; !explicit {
						warn("fractional-cpu", cp+".resources."+which.name+".cpu", fmt.Sprintf("%s CPU is rounded up to %d for ray start", cpu.String(), cpu.Value()), "use whole CPUs, or set rayStartParams num-cpus")
					}
				}
			}
		}
		if name != "" && podsErr == nil {
			if rs, err := startResourcesOf(pods); err == nil {
				for i, r := range rs {
					if r.GPU == nil {
						continue
					}
					g := groups[i]
					limit := int64(0)
					for res, q := range g.tmpl.Spec.Containers[0].Resources.Limits {
						if strings.HasSuffix(string(res), "gpu") {
							limit += q.Value()
						}
					}
					if *r.GPU != limit && *r.GPU > 0 {
						warn("gpu-mismatch", g.path, fmt.Sprintf("Ray will see %d GPUs but the container is limited to %d", *r.GPU, limit), "make num-gpus (or group resources GPU) equal the container's GPU limit")
					}
				}
			}
		}
	}
	if strings.HasPrefix(u.GetAPIVersion(), "ray.io/") {
		annotationRules(u.GetAnnotations(), warn)
		labelRules(u.GetKind(), u.GetLabels(), warn)
	}
	switch u.GetKind() {
	case "RayCluster":
		rc := &rayv1.RayCluster{}
		if fromUnstructured(u.Object, rc) == nil {
			clusterRules(clusterContext{api: api, prefix: "spec.", name: rc.Name, kind: "RayCluster", raw: rawSpec("spec")}, &rc.Spec)
		}
	case "RayJob":
		j := &rayv1.RayJob{}
		if fromUnstructured(u.Object, j) != nil {
			break
		}
		if !j.Spec.ShutdownAfterJobFinishes && j.Spec.DeletionStrategy == nil && j.Spec.RayClusterSpec != nil {
			warn("rayjob-no-cleanup", "spec.shutdownAfterJobFinishes", "the job's RayCluster (and its GPUs) outlives the job: shutdownAfterJobFinishes defaults to false", "set shutdownAfterJobFinishes: true and ttlSecondsAfterFinished")
		}
		if j.Spec.TTLSecondsAfterFinished > 0 && !j.Spec.ShutdownAfterJobFinishes {
			fail("rayjob-ttl-without-shutdown", "spec.ttlSecondsAfterFinished", "a TTL without shutdownAfterJobFinishes does nothing; KubeRay rejects it", "set shutdownAfterJobFinishes: true")
		}
		unboundedRayJob(j, warn)
		if ds := j.Spec.DeletionStrategy; ds != nil && (ds.OnSuccess != nil || ds.OnFailure != nil) && len(ds.DeletionRules) > 0 {
			fail("rayjob-mixed-deletion-policies", "spec.deletionStrategy", "legacy onSuccess/onFailure and deletionRules cannot be mixed", "keep deletionRules")
		}
		rayJobRules(api, j, rawSpec("spec"), fail, warn)
		if len(j.Spec.ClusterSelector) == 0 { // else rayClusterSpec is ignored (rayjob-field-ignored)
			clusterRules(clusterContext{api: api, prefix: "spec.rayClusterSpec.", name: j.Name, kind: "RayJob", raw: rawSpec("spec", "rayClusterSpec")}, j.Spec.RayClusterSpec)
		}
	case "RayService":
		s := &rayv1.RayService{}
		if fromUnstructured(u.Object, s) == nil {
			nestedClusterRules("spec.rayClusterConfig.", "RayService", &s.Spec.RayClusterSpec, fail)
			if u := s.Spec.UpgradeStrategy; u != nil && u.Type != nil && *u.Type == rayv1.RayServiceNewClusterWithIncrementalUpgrade {
				// rayservice_controller.go isZeroDowntimeUpgradeEnabled,
				// with the gate off (the default)
				warn("upgrade-strategy-gate", "spec.upgradeStrategy.type",
					"NewClusterWithIncrementalUpgrade is read only when the operator runs with its RayServiceIncrementalUpgrade feature gate, which is off by default: without it this type turns zero-downtime upgrades off, so a change to rayClusterConfig gets no new cluster (only replicas and worker groups added at the end are applied in place)",
					"use NewCluster, or turn the feature gate on in the operator")
			}
			clusterRules(clusterContext{api: api, prefix: "spec.rayClusterConfig.", name: s.Name, kind: "RayService", raw: rawSpec("spec", "rayClusterConfig"),
				serveService: s.Spec.ServeService != nil}, &s.Spec.RayClusterSpec)
			serviceFieldRules("spec.serveService", s.Namespace, s.Spec.ServeService, warn)
			for _, p := range checkServeConfig(s.Spec.ServeConfigV2) {
				f := Finding{ID: "serve-config", Error: p.refused,
					Path: strings.TrimSuffix(yamlstream.JoinPath("spec.serveConfigV2", p.path), "."), Message: p.message, Fix: p.fix,
					EmbeddedIn: "spec.serveConfigV2", EmbeddedLine: p.line}
				out = append(out, f)
			}
		}
	case "RayCronJob":
		warn("raycronjob-feature-gate", "kind", "the RayCronJob controller is behind a feature gate that is off by default: the CRD accepts the object and nothing runs", "enable the RayCronJob feature gate on the operator")
	case "Service":
		svc := &corev1.Service{}
		if fromUnstructured(u.Object, svc) != nil {
			break
		}
		for k := range svc.Spec.Selector {
			if strings.HasPrefix(k, "ray.io/originated-from-") {
				warn("selector-matches-no-pod", "spec.selector."+k, "KubeRay sets ray.io/originated-from-* on the RayCluster, never on its pods: this Service selects nothing", "select ray.io/cluster (or a label of yours in the pod template) with ray.io/node-type")
			}
		}
		if svc.Spec.Type == corev1.ServiceTypeLoadBalancer || svc.Spec.Type == corev1.ServiceTypeNodePort {
			for i, p := range svc.Spec.Ports {
				if p.Port == 8265 || p.Port == 10001 || p.TargetPort.IntValue() == 8265 || p.TargetPort.IntValue() == 10001 || p.TargetPort.StrVal == "dashboard" || p.TargetPort.StrVal == "client" {
					warn("exposed-dashboard", fmt.Sprintf("spec.ports[%d]", i), fmt.Sprintf("a %s Service exposes Ray's dashboard/job API or client port %d outside the cluster: anyone who reaches it can run code", svc.Spec.Type, p.Port), "use ClusterIP behind an authenticated gateway")
				}
			}
		}
	case "PodDisruptionBudget":
		pdb := &policyv1.PodDisruptionBudget{}
		if fromUnstructured(u.Object, pdb) != nil || pdb.Spec.Selector == nil || !selectsRayPods(pdb.Spec.Selector) {
			break
		}
		const why = "the pods belong to a RayCluster, which has no scale subresource: the disruption controller cannot count them and refuses every eviction (node drains hang)"
		if pdb.Spec.MaxUnavailable != nil {
			warn("pdb-ray-pods", "spec.maxUnavailable", "maxUnavailable over Ray pods: "+why, "use an integer minAvailable")
		} else if m := pdb.Spec.MinAvailable; m != nil && m.Type == intstr.String {
			warn("pdb-ray-pods", "spec.minAvailable", "a percentage minAvailable over Ray pods: "+why, "use an integer minAvailable")
		}
	}
	if kind := u.GetKind(); kind == "RayCluster" && len(u.GetName()) > 53 {
		// KubeRay's own rule reports it too; say why in one line.
		fail("name-too-long", "metadata.name", fmt.Sprintf("%d characters; KubeRay derives pod and Service names from it and allows 53", len(u.GetName())), "shorten the name")
	}
	return out
}
