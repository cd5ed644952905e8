package launch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"gridweave.dev/manifest"
	"gridweave.dev/manifest/validation"
)

// Check outcomes.
const (
	CheckOK   = "ok"
	CheckWarn = "warn"
	CheckFail = "fail"
)

// Check is one doctor finding; a failure or warning says how to fix it.
type Check struct {
	Name    string `json:"name"`
	Outcome string `json:"outcome"`
	Message string `json:"message"`
	Fix     string `json:"fix,omitempty"`
}

func (c Check) String() string {
	s := fmt.Sprintf("%-4s %s: %s", c.Outcome, c.Name, c.Message)
	if c.Fix != "" {
		s += "\n     fix: " + c.Fix
	}
	return s
}

// DoctorOptions tune Doctor.
type DoctorOptions struct {
	// ProbeTimeout bounds the operator probe; default 20 s.
	ProbeTimeout time.Duration
	// NoProbe skips the operator probe (it creates and deletes a
	// RayCluster that never schedules).
	NoProbe bool
}

// Failed says whether any check failed.
func Failed(checks []Check) bool {
	for _, c := range checks {
		if c.Outcome == CheckFail {
			return true
		}
	}
	return false
}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// Doctor checks what the plan needs from the cluster: KubeRay's CRDs at
// the schema this launcher knows, an operator that reconciles in the
// plan's namespace, the PriorityClass, nodes with the GPUs it asks for,
// quota headroom, a CNI that enforces NetworkPolicy, the image pull
// secrets, for a RayService upgraded incrementally the Gateway API, and
// for an autoscaled cluster how long each group's workers may idle.
func (s *Session) Doctor(ctx context.Context, p *Plan, opts DoctorOptions) []Check {
	var checks []Check
	add := func(c Check) { checks = append(checks, c) }

	if _, err := s.Kube.CoreV1().Namespaces().Get(ctx, p.Namespace, metav1.GetOptions{}); err != nil {
		add(Check{"namespace", CheckFail, fmt.Sprintf("namespace %s: %v", p.Namespace, err), "kubectl create namespace " + p.Namespace})
	} else {
		add(Check{"namespace", CheckOK, p.Namespace + " exists", ""})
	}
	// The quota first: the operator probe's pod would count against it.
	quota := s.checkQuota(ctx, p)
	crdsOK := true
	for _, name := range []string{"rayclusters.ray.io", "rayjobs.ray.io", "rayservices.ray.io"} {
		c := s.checkCRD(ctx, name)
		crdsOK = crdsOK && c.Outcome != CheckFail
		add(c)
	}
	if crdsOK && !opts.NoProbe {
		add(s.probeOperator(ctx, p.Namespace, opts.ProbeTimeout))
	} else if !crdsOK {
		add(Check{"operator", CheckFail, "not checked: KubeRay's CRDs are missing, so no operator can run", "install KubeRay " + validation.KubeRayVersion + " (CRDs and operator)"})
	}
	if pc := p.Infra.Infra.PriorityClassName; pc != "" {
		if _, err := s.Kube.SchedulingV1().PriorityClasses().Get(ctx, pc, metav1.GetOptions{}); err != nil {
			add(Check{"priority class", CheckFail, fmt.Sprintf("PriorityClass %s: %v", pc, err), fmt.Sprintf("kubectl create priorityclass %s --value=1000 (or set infra.priorityClassName to one that exists)", pc)})
		} else {
			add(Check{"priority class", CheckOK, pc + " exists", ""})
		}
	}
	checks = append(checks, s.checkGPUs(ctx, p)...)
	checks = append(checks, quota...)
	add(s.checkNetworkPolicy(ctx, p))
	for _, secret := range p.Infra.ImagePullSecrets {
		if _, err := s.Kube.CoreV1().Secrets(p.Namespace).Get(ctx, secret, metav1.GetOptions{}); err != nil {
			add(Check{"image pull secret", CheckFail, fmt.Sprintf("%s/%s: %v", p.Namespace, secret, err),
				fmt.Sprintf("kubectl -n %s create secret docker-registry %s --docker-server=... --docker-username=... --docker-password=...", p.Namespace, secret)})
		} else {
			add(Check{"image pull secret", CheckOK, secret + " exists", ""})
		}
	}
	checks = append(checks, s.checkCronJob(ctx, p)...)
	checks = append(checks, s.checkGateway(ctx, p)...)
	checks = append(checks, idleTimeouts(p)...)
	return checks
}

// rayDefaultIdleTimeout is how long Ray's autoscaler lets a worker idle
// before it removes it, when neither the cluster nor its group says.
const rayDefaultIdleTimeout = 60

// idleTimeouts says, for each autoscaled cluster of the plan, how long a
// worker of each group may idle before the autoscaler removes it: the
// group's idleTimeoutSeconds (autoscaler v2), else the cluster's, else
// Ray's 60 s. A minute is short for GPU workers whose pods take minutes
// to pull and start: that is a warning.
func idleTimeouts(p *Plan) []Check {
	var out []Check
	for _, o := range p.Objects {
		path, ok := clusterSpecPath(o.GetKind())
		if !ok {
			continue
		}
		spec, _, _ := unstructured.NestedMap(o.Object, path...)
		if on, _ := spec["enableInTreeAutoscaling"].(bool); !on {
			continue
		}
		cluster, source := int64(rayDefaultIdleTimeout), "Ray's default"
		if t, found := seconds(spec, "autoscalerOptions", "idleTimeoutSeconds"); found {
			cluster, source = t, "autoscalerOptions.idleTimeoutSeconds"
		}
		var parts []string
		short := false
		groups, _, _ := unstructured.NestedSlice(spec, "workerGroupSpecs")
		for _, g := range groups {
			gm, _ := g.(map[string]any)
			name, _ := gm["groupName"].(string)
			t, src := cluster, source
			if own, found := seconds(gm, "idleTimeoutSeconds"); found {
				t, src = own, "its own idleTimeoutSeconds"
			}
			parts = append(parts, fmt.Sprintf("%s %d s (%s)", name, t, src))
			short = short || t < 5*60 && wantsGPU(gm)
		}
		c := Check{"autoscaling", CheckOK, fmt.Sprintf("%s %s: idle workers are removed after %s", o.GetKind(), o.GetName(), strings.Join(parts, ", ")), ""}
		if short {
			c.Outcome = CheckWarn
			c.Fix = "a GPU worker takes minutes to come back (image pull, Ray start): set the group's idleTimeoutSeconds (or autoscalerOptions.idleTimeoutSeconds) above the gaps between your tasks"
		}
		out = append(out, c)
	}
	return out
}

// seconds reads a whole number of seconds at path (an int64, or a float64
// when the object was decoded from JSON).
func seconds(obj map[string]any, path ...string) (int64, bool) {
	v, found, _ := unstructured.NestedFieldNoCopy(obj, path...)
	switch n := v.(type) {
	case int64:
		return n, found
	case float64:
		return int64(n), found
	}
	return 0, false
}

// rayContainerLimits are the resource limits of a group's Ray container
// (the first), nil when it has none.
func rayContainerLimits(group map[string]any) map[string]any {
	containers, _, _ := unstructured.NestedSlice(group, "template", "spec", "containers")
	if len(containers) == 0 {
		return nil
	}
	c, _ := containers[0].(map[string]any)
	limits, _, _ := unstructured.NestedMap(c, "resources", "limits")
	return limits
}

// wantsGPU reports whether a worker group's Ray container asks for GPUs.
func wantsGPU(group map[string]any) bool {
	for name := range rayContainerLimits(group) {
		if strings.HasSuffix(name, "gpu") {
			return true
		}
	}
	return false
}

// checkCRD compares the cluster's CRD with the one this launcher embeds.
func (s *Session) checkCRD(ctx context.Context, name string) Check {
	fix := "install KubeRay " + validation.KubeRayVersion + "'s CRDs: kubectl apply --server-side -k \"github.com/ray-project/kuberay/ray-operator/config/crd?ref=" + validation.KubeRayVersion + "\""
	got, err := s.Dynamic.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return Check{"CRD " + name, CheckFail, "not installed", fix}
	}
	if err != nil {
		return Check{"CRD " + name, CheckFail, err.Error(), "check the kubeconfig's permissions to read CRDs"}
	}
	raw, err := validation.EmbeddedCRD(name)
	if err != nil {
		return Check{"CRD " + name, CheckWarn, err.Error(), ""}
	}
	var want map[string]any
	if err := yaml.Unmarshal(raw, &want); err != nil {
		return Check{"CRD " + name, CheckWarn, err.Error(), ""}
	}
	wantProps, gotProps := schemaPaths(want), schemaPaths(got.Object)
	if len(gotProps) == 0 {
		return Check{"CRD " + name, CheckFail, "no v1 version is served", fix}
	}
	var missing, extra []string
	for p := range wantProps {
		if !gotProps[p] {
			missing = append(missing, p)
		}
	}
	for p := range gotProps {
		if !wantProps[p] {
			extra = append(extra, p)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	switch {
	case len(missing) > 0:
		return Check{"CRD " + name, CheckWarn, fmt.Sprintf("older than KubeRay %s's schema: %d fields missing (%s)", validation.KubeRayVersion, len(missing), strings.Join(first(missing, 3), ", ")), fix}
	case len(extra) > 0:
		return Check{"CRD " + name, CheckWarn, fmt.Sprintf("newer than KubeRay %s's schema: %d fields this launcher does not know (%s)", validation.KubeRayVersion, len(extra), strings.Join(first(extra, 3), ", ")), "use a launcher built for that KubeRay version"}
	}
	return Check{"CRD " + name, CheckOK, "installed, KubeRay " + validation.KubeRayVersion + " schema", ""}
}

func first(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], "…")
	}
	return s
}

// schemaPaths lists the property paths (three levels deep under spec) of
// a CRD's served v1 schema.
func schemaPaths(crd map[string]any) map[string]bool {
	versions, _, _ := unstructured.NestedSlice(crd, "spec", "versions")
	for _, v := range versions {
		m, _ := v.(map[string]any)
		if m["name"] != "v1" || m["served"] != true {
			continue
		}
		spec, _, _ := unstructured.NestedMap(m, "schema", "openAPIV3Schema", "properties", "spec")
		out := map[string]bool{}
		var walk func(prefix string, schema map[string]any, depth int)
		walk = func(prefix string, schema map[string]any, depth int) {
			props, _ := schema["properties"].(map[string]any)
			for name, sub := range props {
				path := prefix + "." + name
				out[path] = true
				if sm, ok := sub.(map[string]any); ok && depth < 3 {
					walk(path, sm, depth+1)
				}
			}
		}
		walk("spec", spec, 1)
		return out
	}
	return nil
}

// probeOperator creates a RayCluster that can never schedule (its head's
// node selector matches no node) in the namespace and waits until the
// operator reconciles it (creates its head service or pod; a full pod
// quota may refuse the pod, not the service): proof that an operator
// runs, is ready, and watches this namespace. The probe is deleted
// afterwards, and doctor waits (briefly) until its pod is gone: left
// behind, it would count against the namespace's pod quota, in the next
// doctor's quota check as in the user's launch.
func (s *Session) probeOperator(ctx context.Context, namespace string, timeout time.Duration) Check {
	if timeout <= 0 {
		timeout = 20 * time.Second
	}
	fix := "start the KubeRay operator " + validation.KubeRayVersion + " and make it watch " + namespace + " (helm upgrade --install kuberay-operator kuberay/kuberay-operator --version " + strings.TrimPrefix(validation.KubeRayVersion, "v") + "; a single-namespace install must list it in watchNamespace)"
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	name := "gridweave-doctor-" + hex.EncodeToString(suffix)
	probe := &rayv1.RayCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{"app.kubernetes.io/managed-by": manifest.ManagedBy, "app.kubernetes.io/component": "doctor-probe"}},
		Spec: rayv1.RayClusterSpec{HeadGroupSpec: rayv1.HeadGroupSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"gridweave.dev/doctor-probe": "no-node-has-this"},
			Containers: []corev1.Container{{Name: "ray-head", Image: "rayproject/ray:" + manifest.DefaultRayVersion,
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")}}}},
		}}}},
	}
	if _, err := s.Ray.RayV1().RayClusters(namespace).Create(ctx, probe, metav1.CreateOptions{}); err != nil {
		return Check{"operator", CheckWarn, "could not create the probe RayCluster: " + err.Error(), "run doctor with rights to create RayClusters in " + namespace + ", or --no-probe"}
	}
	check := s.awaitProbe(ctx, namespace, name, timeout, fix)
	cleanup := context.WithoutCancel(ctx)
	err := s.Ray.RayV1().RayClusters(namespace).Delete(cleanup, name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
	if err != nil && !apierrors.IsNotFound(err) && check.Outcome == CheckOK {
		return Check{"operator", CheckWarn, check.Message + "; but the probe RayCluster could not be deleted: " + err.Error(),
			fmt.Sprintf("kubectl -n %s delete raycluster %s", namespace, name)}
	}
	s.awaitProbePodsGone(cleanup, namespace, name, 10*time.Second)
	return check
}

// awaitProbePodsGone waits up to limit until no pod of the probe is left
// (the garbage collector deletes them after the RayCluster).
func (s *Session) awaitProbePodsGone(ctx context.Context, namespace, name string, limit time.Duration) {
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		pods, err := s.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "ray.io/cluster=" + name})
		if err != nil || len(pods.Items) == 0 {
			return
		}
	}
}

// awaitProbe waits until the operator reconciles the probe.
func (s *Session) awaitProbe(ctx context.Context, namespace, name string, timeout time.Duration, fix string) Check {
	start := time.Now()
	for time.Since(start) < timeout {
		pods, err := s.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "ray.io/cluster=" + name})
		services, serr := s.Kube.CoreV1().Services(namespace).List(ctx, metav1.ListOptions{LabelSelector: "ray.io/cluster=" + name})
		if (err == nil && len(pods.Items) > 0) || (serr == nil && len(services.Items) > 0) {
			return Check{"operator", CheckOK, fmt.Sprintf("reconciles RayClusters in %s (answered a probe in %s)", namespace, time.Since(start).Round(100*time.Millisecond)), ""}
		}
		select {
		case <-ctx.Done():
			return Check{"operator", CheckFail, ctx.Err().Error(), ""}
		case <-time.After(250 * time.Millisecond):
		}
	}
	return Check{"operator", CheckFail, fmt.Sprintf("no KubeRay operator reconciled a probe RayCluster in %s within %s: it is not running, not ready, or does not watch this namespace", namespace, timeout), fix}
}

// gpuNeeds is what the plan's Ray worker groups ask for: per resource
// name, the pods and the GPUs each.
type gpuNeed struct {
	resource string
	perPod   int64
	pods     int64
	groups   []string
}

// clusterSpecPath is where an object of kind holds a RayClusterSpec
// (false for a kind that holds none).
func clusterSpecPath(kind string) ([]string, bool) {
	switch kind {
	case "RayCluster":
		return []string{"spec"}, true
	case "RayJob":
		return []string{"spec", "rayClusterSpec"}, true
	case "RayService":
		return []string{"spec", "rayClusterConfig"}, true
	}
	return nil, false
}

// groupPods is how many pods a worker group asks for: replicas times
// numOfHosts (at least one host each).
func groupPods(group map[string]any) int64 {
	replicas, _, _ := unstructured.NestedInt64(group, "replicas")
	hosts, found, _ := unstructured.NestedInt64(group, "numOfHosts")
	if !found || hosts < 1 {
		hosts = 1
	}
	return replicas * hosts
}

func planGPUNeeds(p *Plan) []gpuNeed {
	needs := map[string]*gpuNeed{}
	for _, o := range p.Objects {
		path, ok := clusterSpecPath(o.GetKind())
		if !ok {
			continue
		}
		groups, _, _ := unstructured.NestedSlice(o.Object, append(path, "workerGroupSpecs")...)
		for _, g := range groups {
			gm, _ := g.(map[string]any)
			pods := groupPods(gm)
			for name, v := range rayContainerLimits(gm) {
				if !strings.HasSuffix(name, "gpu") {
					continue
				}
				q, err := resource.ParseQuantity(fmt.Sprint(v))
				if err != nil || q.Value() == 0 {
					continue
				}
				key := fmt.Sprintf("%s/%d", name, q.Value())
				if needs[key] == nil {
					needs[key] = &gpuNeed{resource: name, perPod: q.Value()}
				}
				needs[key].pods += pods
				gname, _ := gm["groupName"].(string)
				needs[key].groups = append(needs[key].groups, gname)
			}
		}
	}
	var out []gpuNeed
	for _, n := range needs {
		sort.Strings(n.groups)
		out = append(out, *n)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].resource+fmt.Sprint(out[i].perPod) < out[j].resource+fmt.Sprint(out[j].perPod)
	})
	return out
}

// checkGPUs: nodes with allocatable GPUs of the requested resource name,
// enough for one pod each, and enough in all for the pods.
func (s *Session) checkGPUs(ctx context.Context, p *Plan) []Check {
	needs := planGPUNeeds(p)
	if len(needs) == 0 {
		return nil
	}
	nodes, err := s.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return []Check{{"GPU nodes", CheckWarn, "cannot list nodes: " + err.Error(), "run doctor with rights to list nodes"}}
	}
	var out []Check
	for _, n := range needs {
		fit, slots := 0, int64(0)
		for _, node := range nodes.Items {
			if node.Spec.Unschedulable {
				continue
			}
			q := node.Status.Allocatable[corev1.ResourceName(n.resource)]
			if q.Value() >= n.perPod {
				fit++
				slots += q.Value() / n.perPod
			}
		}
		name := fmt.Sprintf("GPU nodes (%s)", strings.Join(n.groups, ", "))
		switch {
		case fit == 0:
			out = append(out, Check{name, CheckFail, fmt.Sprintf("no schedulable node has %d allocatable %s; %d pods need it", n.perPod, n.resource, n.pods),
				fmt.Sprintf("join GPU nodes (the master's join command) or install the device plugin that advertises %s; or ask for fewer GPUs per pod", n.resource)})
		case slots < n.pods:
			out = append(out, Check{name, CheckWarn, fmt.Sprintf("%d pods of %d %s each, but the nodes fit only %d such pods", n.pods, n.perPod, n.resource, slots),
				"add GPU nodes or lower the fleets' replicas; the extra pods stay Pending"})
		default:
			out = append(out, Check{name, CheckOK, fmt.Sprintf("%d nodes fit %d pods of %d %s; %d needed", fit, slots, n.perPod, n.resource, n.pods), ""})
		}
	}
	return out
}

// checkQuota compares the namespace's ResourceQuotas' headroom with what
// the plan's pods ask for: their count, and their requests and limits
// (a container without requests requests its limits).
func (s *Session) checkQuota(ctx context.Context, p *Plan) []Check {
	quotas, err := s.Kube.CoreV1().ResourceQuotas(p.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return []Check{{"quota", CheckWarn, "cannot read the ResourceQuotas of " + p.Namespace + ": " + err.Error(), "run doctor with rights to list resourcequotas"}}
	}
	if len(quotas.Items) == 0 {
		return []Check{{"quota", CheckOK, "no ResourceQuota in " + p.Namespace, ""}}
	}
	want := planQuotaUsage(p)
	var out []Check
	for _, rq := range quotas.Items {
		names := make([]string, 0, len(want))
		for name := range want {
			names = append(names, string(name))
		}
		sort.Strings(names)
		for _, n := range names {
			name := corev1.ResourceName(n)
			hard, ok := rq.Status.Hard[name]
			if !ok {
				hard, ok = rq.Spec.Hard[name]
			}
			if !ok {
				continue
			}
			need := want[name]
			used := rq.Status.Used[name]
			left := hard.DeepCopy()
			left.Sub(used)
			if left.Cmp(need) < 0 {
				out = append(out, Check{"quota " + rq.Name, CheckFail, fmt.Sprintf("%s: %s left of %s, the launch needs %s", name, left.String(), hard.String(), need.String()),
					"ask the namespace's administrator for more " + string(name) + ", or lower the fleets' replicas"})
			}
		}
	}
	if len(out) == 0 {
		out = append(out, Check{"quota", CheckOK, "headroom for the launch's pods and requests", ""})
	}
	return out
}

// planQuotaUsage is what the plan's pods count against a ResourceQuota:
// pods, requests.* (and their bare aliases) and limits.*.
func planQuotaUsage(p *Plan) corev1.ResourceList {
	usage := corev1.ResourceList{}
	add := func(name corev1.ResourceName, q resource.Quantity, times int64) {
		total := usage[name]
		for range times {
			total.Add(q)
		}
		usage[name] = total
	}
	addTemplate := func(template map[string]any, count int64) {
		if count <= 0 {
			return
		}
		add(corev1.ResourcePods, resource.MustParse("1"), count)
		containers, _, _ := unstructured.NestedSlice(template, "spec", "containers")
		for _, c := range containers {
			cm, _ := c.(map[string]any)
			requests, _, _ := unstructured.NestedMap(cm, "resources", "requests")
			limits, _, _ := unstructured.NestedMap(cm, "resources", "limits")
			if requests == nil {
				requests = map[string]any{}
			}
			for name, v := range limits {
				if q, err := resource.ParseQuantity(fmt.Sprint(v)); err == nil {
					add(corev1.ResourceName("limits."+name), q, count)
					if _, set := requests[name]; !set {
						requests[name] = v
					}
				}
			}
			for name, v := range requests {
				if q, err := resource.ParseQuantity(fmt.Sprint(v)); err == nil {
					add(corev1.ResourceName("requests."+name), q, count)
					if name == "cpu" || name == "memory" || name == "ephemeral-storage" {
						add(corev1.ResourceName(name), q, count)
					}
				}
			}
		}
	}
	for _, o := range p.Objects {
		switch o.GetKind() {
		case "Deployment":
			replicas, found, _ := unstructured.NestedInt64(o.Object, "spec", "replicas")
			if !found {
				replicas = 1
			}
			template, _, _ := unstructured.NestedMap(o.Object, "spec", "template")
			addTemplate(template, replicas)
		case "RayCluster", "RayJob":
			path, _ := clusterSpecPath(o.GetKind())
			head, _, _ := unstructured.NestedMap(o.Object, append(path, "headGroupSpec", "template")...)
			addTemplate(head, 1)
			groups, _, _ := unstructured.NestedSlice(o.Object, append(path, "workerGroupSpecs")...)
			for _, g := range groups {
				gm, _ := g.(map[string]any)
				template, _, _ := unstructured.NestedMap(gm, "template")
				addTemplate(template, groupPods(gm))
			}
		}
	}
	return usage
}

// checkNetworkPolicy looks for a CNI known to enforce NetworkPolicy.
func (s *Session) checkNetworkPolicy(ctx context.Context, p *Plan) Check {
	needs := false
	for _, o := range p.Objects {
		needs = needs || o.GetKind() == "NetworkPolicy"
	}
	if !needs {
		return Check{"network policy", CheckOK, "the launch has no NetworkPolicy", ""}
	}
	pods, err := s.Kube.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{})
	if err != nil {
		return Check{"network policy", CheckWarn, "cannot list kube-system pods to find the CNI: " + err.Error(), ""}
	}
	for _, pod := range pods.Items {
		for _, cni := range []string{"calico", "cilium", "antrea", "kube-router", "weave-net", "canal", "kube-ovn"} {
			if strings.Contains(pod.Name, cni) {
				return Check{"network policy", CheckOK, "enforced (" + cni + " runs in kube-system)", ""}
			}
		}
	}
	return Check{"network policy", CheckWarn, "no CNI known to enforce NetworkPolicy runs in kube-system (flannel alone does not, and k3s enforces it only with its embedded controller): the sandbox's egress rules may be ignored",
		"run a CNI that enforces NetworkPolicy (Calico, Cilium), or k3s with its network policy controller enabled"}
}

// checkCronJob: a RayCronJob needs its CRD and the operator's RayCronJob
// feature gate (off by default in KubeRay v1.6).
func (s *Session) checkCronJob(ctx context.Context, p *Plan) []Check {
	for _, o := range p.Objects {
		if o.GetKind() != "RayCronJob" {
			continue
		}
		if _, err := s.Dynamic.Resource(crdResource).Get(ctx, "raycronjobs.ray.io", metav1.GetOptions{}); err != nil {
			return []Check{{"RayCronJob", CheckFail, "raycronjobs.ray.io is not installed", "install KubeRay " + validation.KubeRayVersion + "'s CRDs"}}
		}
		return []Check{{"RayCronJob", CheckWarn, "the operator's RayCronJob feature gate (off by default) cannot be read from the API server",
			"make sure the operator runs with --feature-gates=RayCronJob=true"}}
	}
	return nil
}

// checkGateway: a RayService upgraded with NewClusterWithIncrementalUpgrade
// needs the Gateway API CRDs, a GatewayClass and the operator's feature gate.
func (s *Session) checkGateway(ctx context.Context, p *Plan) []Check {
	incremental := false
	for _, o := range p.Objects {
		if o.GetKind() != "RayService" {
			continue
		}
		t, _, _ := unstructured.NestedString(o.Object, "spec", "upgradeStrategy", "type")
		incremental = incremental || t == "NewClusterWithIncrementalUpgrade"
	}
	if !incremental {
		return nil
	}
	var out []Check
	for _, name := range []string{"gateways.gateway.networking.k8s.io", "httproutes.gateway.networking.k8s.io", "gatewayclasses.gateway.networking.k8s.io"} {
		if _, err := s.Dynamic.Resource(crdResource).Get(ctx, name, metav1.GetOptions{}); err != nil {
			out = append(out, Check{"Gateway API", CheckFail, name + " is not installed", "install the Gateway API's standard CRDs and a Gateway controller"})
		}
	}
	if len(out) == 0 {
		classes, err := s.Dynamic.Resource(schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gatewayclasses"}).List(ctx, metav1.ListOptions{})
		if err != nil || len(classes.Items) == 0 {
			out = append(out, Check{"Gateway API", CheckFail, "no GatewayClass", "install a Gateway controller (e.g. Istio, Envoy Gateway) that provides a GatewayClass"})
		} else {
			out = append(out, Check{"Gateway API", CheckOK, fmt.Sprintf("%d GatewayClasses", len(classes.Items)), ""})
		}
	}
	out = append(out, Check{"RayServiceIncrementalUpgrade", CheckWarn, "the operator's feature gate cannot be read from the API server",
		"make sure the operator runs with --feature-gates=RayServiceIncrementalUpgrade=true"})
	return out
}
