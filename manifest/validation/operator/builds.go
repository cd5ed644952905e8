package operator

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/ray-project/kuberay/ray-operator/controllers/ray/utils/dashboardclient"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	pathvalidation "k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"gridweave.dev/rayctl"
	"gridweave.dev/rayctl/operatorbuild"
)

// What the operator builds from a cluster spec — the head Service, the
// serve Service, each group's pod — checked the way the API server will
// check it when the operator creates it. Package rayctl/operatorbuild
// builds them: a port of the operator's builders that its differential
// test holds to KubeRay's own, so what is checked is what the operator
// sends.

// clusterContext is what the operator rules need to know of the object a
// cluster spec sits in.
type clusterContext struct {
	api         APIServer
	prefix      string // the spec's path: "spec." or "spec.rayClusterSpec."
	name        string // the RayCluster's (or owner's) name; "" for generateName
	kind        string // RayCluster, RayJob or RayService
	annotations map[string]string
	raw         map[string]any // the spec as written (what was left out)
	// serveService: a RayService that gives its own serve Service.
	serveService bool
}

// standInName is the name the operator's builders are given: the
// object's when it is a RayCluster name KubeRay allows (a longer one is
// refused by KubeRay's validation), "cluster" otherwise.
func (c clusterContext) standInName() string {
	if c.name != "" && len(c.name) <= 53 && len(apivalidation.NameIsDNS1035Label(c.name, false)) == 0 {
		return c.name
	}
	return "cluster"
}

// headServiceRules builds the head Service as the RayCluster controller
// does (common.BuildServiceForHeadPod) and checks it as the API server
// will: a Service it refuses stops the operator's reconcile before any
// pod is created (raycluster_controller.go reconcileHeadService).
func headServiceRules(c clusterContext, spec *rayv1.RayClusterSpec, fail func(id, path, msg, fix string)) {
	rc := rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: c.standInName(), Namespace: "default"}, Spec: *asStored(spec)}
	if rayctl.OperatorClusterSpecError(&rc.Spec, c.annotations) != nil {
		return // KubeRay refuses it: reported by its own rule
	}
	svc := operatorbuild.HeadService(rc, nil, nil)
	errs := c.api.ServiceErrors(svc)
	errs = append(errs, metav1validation.ValidateLabels(svc.Labels, field.NewPath("metadata", "labels"))...)
	errs = append(errs, apivalidation.ValidateAnnotations(svc.Annotations, field.NewPath("metadata", "annotations"))...)
	for _, msg := range apivalidation.NameIsDNS1035Label(svc.Name, false) {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), svc.Name, msg))
	}
	for _, e := range errs {
		if strings.HasPrefix(e.Field, "spec.ports[") && e.Type == field.ErrorTypeInvalid {
			continue // a port number or name the pod's checks already refuse in the container
		}
		path := c.prefix + "headGroupSpec"
		switch {
		case strings.HasPrefix(e.Field, "spec.type"):
			path += ".serviceType"
		case strings.HasPrefix(e.Field, "metadata"):
			path += ".headService.metadata"
		case strings.HasPrefix(e.Field, "spec.ports"):
			path += ".template.spec.containers[0].ports"
			if spec.HeadGroupSpec.HeadService != nil && len(spec.HeadGroupSpec.HeadService.Spec.Ports) > 0 {
				path = c.prefix + "headGroupSpec.headService.spec.ports"
			}
		}
		fail("head-service-refused", path, fmt.Sprintf(
			"the operator builds the head Service %s from this spec and the API server refuses it (%s): the operator retries at every reconcile and creates no pod, not even the head",
			svc.Name, e.Error()), headServiceFix(e.Field))
	}
}

func headServiceFix(field string) string {
	switch {
	case strings.HasPrefix(field, "spec.type"):
		return "use ClusterIP, NodePort or LoadBalancer (exactly so written)"
	case strings.HasPrefix(field, "spec.ports"):
		return "the operator adds the head container's ports (and metrics: 8080) to the Service: give each port its own name and number"
	}
	return ""
}

// serveServiceRules: a RayCluster asking for a serve Service, or a
// RayService without serveService, whose head container declares ports
// but none named serve (or serve-*): the operator's
// common.BuildServeService refuses to build it.
func serveServiceRules(c clusterContext, spec *rayv1.RayClusterSpec, fail func(id, path, msg, fix string)) {
	wanted := c.kind == "RayService" && !c.serveService || (c.kind == "RayCluster" && c.annotations[operatorbuild.EnableServeServiceAnnotation] == "true")
	if !wanted {
		return // a RayService's own serveService is used as it is
	}
	rc := rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: c.standInName(), Namespace: "default"}, Spec: *asStored(spec)}
	if rayctl.OperatorClusterSpecError(&rc.Spec, c.annotations) != nil {
		return
	}
	if _, err := operatorbuild.ServeService(rayv1.RayService{ObjectMeta: metav1.ObjectMeta{Name: c.standInName()}}, rc, c.kind == "RayService"); err == nil {
		return
	}
	what := "the operator cannot build the serve Service the ray.io/enable-serve-service annotation asks for, and stops its reconcile before any pod is created"
	if c.kind == "RayService" {
		what = "the operator cannot build the RayService's serve Service, so the RayService never serves"
	}
	fail("serve-port-missing", c.prefix+"headGroupSpec.template.spec.containers[0].ports",
		"the head container declares ports but none named serve (or serve-…): "+what,
		"add a port named serve (containerPort 8000), as the operator's default ports have")
}

// headSelectorRules: a head Service finds the head pod by labels the
// operator puts on both, but the pod takes the user's value for one of
// them (common/pod.go DefaultHeadPodTemplate: the template's labels and
// headGroupSpec.labels win in labelPod) where the Service keeps the
// operator's: the RayCluster's head Service carries over only
// app.kubernetes.io/name from the template (raycluster_controller.go
// reconcileHeadService), the head Service a RayJob or RayService makes
// of its own (BuildHeadServiceForRayJob, BuildHeadServiceForRayService)
// nothing. The pod and the Services are built as the operator builds
// them (rayctl/operatorbuild) and compared.
func headSelectorRules(c clusterContext, spec *rayv1.RayClusterSpec, fail func(id, path, msg, fix string)) {
	name := c.standInName()
	if c.kind != "RayCluster" {
		name += "-x7k2p" // an owner's cluster is named after it with a random suffix
	}
	rc := rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: *asStored(spec)}
	rc.Spec.HeadGroupSpec.Template.Spec.ServiceAccountName = "sa" // autoscalerServiceAccountRules judge the name
	if rayctl.OperatorClusterSpecError(&rc.Spec, c.annotations) != nil || len(rc.Spec.HeadGroupSpec.Template.Spec.Containers) == 0 {
		return
	}
	head := rc.Spec.HeadGroupSpec
	pod := operatorbuild.HeadPodTemplate(rc, head, name+"-head", operatorbuild.HeadPort(head.RayStartParams))
	carried := map[string]string{}
	if v, ok := spec.HeadGroupSpec.Template.Labels[operatorbuild.AppNameLabel]; ok {
		carried[operatorbuild.AppNameLabel] = v
	}
	type headService struct {
		what  string
		build func() *corev1.Service
	}
	services := []headService{{"the head Service the operator builds", func() *corev1.Service {
		return operatorbuild.HeadService(rc, carried, nil)
	}}}
	switch c.kind {
	case "RayJob":
		services = append(services, headService{"the RayJob's own head Service", func() *corev1.Service {
			return operatorbuild.HeadServiceForRayJob(rayv1.RayJob{ObjectMeta: metav1.ObjectMeta{Name: c.standInName()}}, rc)
		}})
	case "RayService":
		services = append(services, headService{"the RayService's own head Service (its stable name)", func() *corev1.Service {
			return operatorbuild.HeadServiceForRayService(rayv1.RayService{ObjectMeta: metav1.ObjectMeta{Name: c.standInName()}}, rc)
		}})
	}
	type mismatch struct {
		want  string
		whats []string
	}
	mismatches := map[string]*mismatch{}
	for _, s := range services {
		svc := s.build()
		for k, want := range svc.Spec.Selector {
			if pod.Labels[k] == want {
				continue
			}
			if mismatches[k] == nil {
				mismatches[k] = &mismatch{want: want}
			}
			mismatches[k].whats = append(mismatches[k].whats, s.what)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(mismatches)) {
		m := mismatches[k]
		path := c.prefix + "headGroupSpec.template.metadata.labels." + k
		if _, ok := spec.HeadGroupSpec.Labels[k]; ok {
			path = c.prefix + "headGroupSpec.labels." + k
		}
		if k == operatorbuild.IdentifierLabel && c.kind != "RayCluster" {
			m.want = "<its cluster's generated name>-head"
		}
		fail("head-service-selects-nothing", path, fmt.Sprintf(
			"the head pod is labelled %s=%q, while %s select%s %s=%q: no pod is selected, so what reaches the head through it (the workers, the dashboard) reaches nothing",
			k, pod.Labels[k], strings.Join(m.whats, " and "), map[bool]string{true: "s", false: ""}[len(m.whats) == 1], k, m.want), "drop this label: the operator sets it")
	}
}

// ingressRules: a RayCluster with enableIngress gets an Ingress the
// operator builds (common/ingress.go BuildIngressForHeadService) from
// its name and annotations; the API server refusing it stops the
// reconcile (raycluster_controller.go reconcileIngress, before the head
// Service): FailedToCreateIngress, and no pod.
func ingressRules(c clusterContext, spec *rayv1.RayClusterSpec, fail func(id, path, msg, fix string)) {
	if !ptr.Deref(spec.HeadGroupSpec.EnableIngress, false) {
		return // (a RayJob or RayService gives its cluster its annotations)
	}
	if len(spec.HeadGroupSpec.Template.Spec.Containers) == 0 {
		return // the operator builds nothing of a head without containers (pod-containers says so)
	}
	rc := rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: c.standInName(), Namespace: "default", Annotations: c.annotations}, Spec: *asStored(spec)}
	ing := operatorbuild.Ingress(rc)
	errs := c.api.IngressErrors(ing)
	errs = append(errs, metav1validation.ValidateLabels(ing.Labels, field.NewPath("metadata", "labels"))...)
	for _, e := range errs {
		path := c.prefix + "headGroupSpec.enableIngress"
		if strings.HasPrefix(e.Field, "spec.ingressClassName") {
			path = "metadata.annotations." + operatorbuild.IngressClassAnnotation
		}
		fail("ingress-refused", path, fmt.Sprintf(
			"with enableIngress the operator builds the Ingress %s, and the API server refuses it (%s): the operator records FailedToCreateIngress at every reconcile and stops before the head Service: no pod at all (on OpenShift it makes a Route instead)",
			ing.Name, e.Error()), "write the class as the IngressClass is named: lowercase letters, digits, '-' and '.'")
	}
}

// autoscalerServiceAccountRules: with autoscaling, the operator gives the
// head pod utils.CheckName of its service account name (common/pod.go
// DefaultHeadPodTemplate): past 50 characters the name is cut from the
// front, and a first character that is a digit becomes "r". The pod then
// names an account that is not the one written.
func autoscalerServiceAccountRules(c clusterContext, spec *rayv1.RayClusterSpec, fail func(id, path, msg, fix string)) {
	sa := spec.HeadGroupSpec.Template.Spec.ServiceAccountName
	if sa == "" || !ptr.Deref(spec.EnableInTreeAutoscaling, false) {
		return
	}
	checked := operatorbuild.CheckedName(sa)
	if checked == sa {
		return
	}
	fail("autoscaler-service-account", c.prefix+"headGroupSpec.template.spec.serviceAccountName", fmt.Sprintf(
		"with autoscaling the operator gives the head pod serviceAccountName %q, not %q (it cuts names to their last 50 characters and replaces a leading digit): the API server refuses the head pod unless an account of that name exists, so the cluster never starts",
		checked, sa), "use a name of at most 50 characters that begins with a letter")
}

// podRules builds each group's pod as the operator does and reports what
// the operator adds that clashes with the template: a container of the
// name of one it adds (the API server refuses every such pod), an env var
// it sets after the user's (the user's value is silently replaced).
func podRules(c clusterContext, spec *rayv1.RayClusterSpec, pods []builtPod, fail, warn func(id, path, msg, fix string)) {
	for i, p := range pods {
		path, tmpl := c.prefix+"headGroupSpec.template.spec", spec.HeadGroupSpec.Template.Spec
		if i > 0 {
			path, tmpl = fmt.Sprintf("%sworkerGroupSpecs[%d].template.spec", c.prefix, i-1), spec.WorkerGroupSpecs[i-1].Template.Spec
		}
		written := map[string]string{} // container name -> its path in the template
		for j, ctr := range tmpl.InitContainers {
			written[ctr.Name] = fmt.Sprintf("%s.initContainers[%d].name", path, j)
		}
		for j, ctr := range tmpl.Containers {
			written[ctr.Name] = fmt.Sprintf("%s.containers[%d].name", path, j)
		}
		count := map[string]int{}
		for _, ctr := range slices.Concat(p.pod.Spec.InitContainers, p.pod.Spec.Containers) {
			count[ctr.Name]++
		}
		for _, name := range slices.Sorted(maps.Keys(count)) {
			if count[name] > 1 && written[name] != "" && templateCount(tmpl, name) == 1 {
				fix := "rename the container"
				if name == "wait-gcs-ready" {
					fix = "drop it: the operator adds its own (unless it runs with ENABLE_INIT_CONTAINER_INJECTION=false)"
				}
				fail("operator-container-name", written[name], fmt.Sprintf(
					"the operator adds a container named %q to this group's pods: two containers of one name, so the API server refuses every pod of the group",
					name), fix)
			}
		}
		if len(tmpl.Containers) == 0 {
			continue
		}
		user := map[string]int{}
		for _, e := range tmpl.Containers[0].Env {
			user[e.Name]++
		}
		built := map[string]int{}
		for _, e := range p.pod.Spec.Containers[0].Env {
			built[e.Name]++
		}
		for _, name := range slices.Sorted(maps.Keys(built)) {
			if user[name] > 0 && built[name] > user[name] {
				warn("operator-env-overrides", path+".containers[0].env", fmt.Sprintf(
					"the operator sets %s in the Ray container after yours: the later entry wins, so your value is replaced", name),
					"drop it; the operator sets it")
			}
		}
	}
}

func templateCount(tmpl corev1.PodSpec, name string) int {
	n := 0
	for _, ctr := range slices.Concat(tmpl.InitContainers, tmpl.Containers) {
		if ctr.Name == name {
			n++
		}
	}
	return n
}

// groupRules are the rules on single fields of a cluster spec that the
// operator reads without checking.
func groupRules(c clusterContext, spec *rayv1.RayClusterSpec, fail, warn func(id, path, msg, fix string)) {
	cluster := c.name
	if cluster == "" {
		cluster = "cluster"
	}
	rawGroups, _ := c.raw["workerGroupSpecs"].([]any)
	for i, g := range spec.WorkerGroupSpecs {
		p := fmt.Sprintf("%sworkerGroupSpecs[%d]", c.prefix, i)
		var raw map[string]any
		if i < len(rawGroups) {
			raw, _ = rawGroups[i].(map[string]any)
		}
		// A RayJob's or RayService's cluster is created with a typed client,
		// which leaves a zero numOfHosts out (the CRD's default, 1, then
		// applies); a negative one stays.
		if _, written := raw["numOfHosts"]; written && (g.NumOfHosts < 0 || g.NumOfHosts == 0 && c.kind == "RayCluster") {
			fail("num-of-hosts", p+".numOfHosts", fmt.Sprintf(
				"%d hosts per replica: the operator asks for replicas × numOfHosts pods, so this group gets none (a negative number makes the operator fail at every reconcile)",
				g.NumOfHosts), "use 1 (the default) or more")
		}
		resourceRules(p+".resources", g.Resources, fail)
		if g.Suspend != nil && *g.Suspend || g.ScaleStrategy.WorkersToDelete == nil {
			continue
		}
		prefix := operatorbuild.PodName(cluster+"-"+g.GroupName, rayv1.WorkerNode, true)
		for j, name := range g.ScaleStrategy.WorkersToDelete {
			wp := fmt.Sprintf("%s.scaleStrategy.workersToDelete[%d]", p, j)
			if g.NumOfHosts > 1 {
				continue // matched against the group's own pods (RayMultiHostIndexing)
			}
			if msgs := pathvalidation.IsValidPathSegmentName(name); name == "" || len(msgs) > 0 {
				problem := "is empty"
				if name != "" {
					problem = msgs[0]
				}
				fail("workers-to-delete-name", wp, fmt.Sprintf(
					"%q %s: the operator's delete of it is refused before it is sent, so at every reconcile it records FailedToDeleteWorkerPod and stops: this group and the groups after it never get their pods",
					name, problem), "name pods of this group, as `kubectl get pods -l ray.io/group="+g.GroupName+"` lists them")
				continue
			}
			// (A RayJob's or RayService's cluster is named after it with a
			// random suffix: its pods' names are not known here.)
			if c.name != "" && c.kind == "RayCluster" && !strings.HasPrefix(name, prefix) {
				warn("workers-to-delete-foreign", wp, fmt.Sprintf(
					"%q is not a pod of this group (they are named %s<random>): the operator deletes whatever pod has this name in the namespace, at every reconcile while it is listed",
					name, prefix), "list only this group's worker pods")
			}
		}
	}
	resourceRules(c.prefix+"headGroupSpec.resources", spec.HeadGroupSpec.Resources, fail)
	if ft := spec.GcsFaultToleranceOptions; ft != nil {
		for _, cred := range []struct {
			field, env string
			value      *rayv1.RedisCredential
		}{{"redisPassword", "REDIS_PASSWORD", ft.RedisPassword}, {"redisUsername", "REDIS_USERNAME", ft.RedisUsername}} {
			if cred.value == nil || cred.value.ValueFrom == nil {
				continue
			}
			problem := ""
			if cred.value.Value != "" {
				problem = "both value and valueFrom"
			} else if n := envSources(cred.value.ValueFrom); n != 1 {
				problem = fmt.Sprintf("valueFrom with %d sources", n)
			}
			if problem != "" {
				fail("redis-credential", c.prefix+"gcsFaultToleranceOptions."+cred.field, fmt.Sprintf(
					"%s: the operator copies it into the head's %s env var as it is, and the API server refuses such a pod: no head, the cluster never starts",
					problem, cred.env), "give value, or valueFrom with one source (a secretKeyRef)")
			}
		}
	}
	if c.kind == "RayJob" || c.kind == "RayService" {
		head := spec.HeadGroupSpec.Template.Spec
		if len(head.Containers) > 0 && len(head.Containers[0].Ports) > 0 && !slices.ContainsFunc(head.Containers[0].Ports, func(p corev1.ContainerPort) bool { return p.Name == operatorbuild.DashboardPortName }) {
			fail("dashboard-port-missing", c.prefix+"headGroupSpec.template.spec.containers[0].ports", fmt.Sprintf(
				"the head container declares ports but none named %s: the head Service then has no dashboard port, and the operator, which talks to Ray through it, waits for it without end (the cluster runs, the %s never starts)",
				operatorbuild.DashboardPortName, c.kind), "add a port named dashboard (containerPort 8265), as the operator's default ports have")
		}
	}
	if o := spec.AutoscalerOptions; o != nil && !ptr.Deref(spec.EnableInTreeAutoscaling, false) {
		// version alone is read without the autoscaler too (KubeRay's
		// validation of idleTimeoutSeconds wants v2).
		if rest := *o; true {
			rest.Version = nil
			if !reflect.ValueOf(rest).IsZero() {
				warn("autoscaler-options-ignored", c.prefix+"autoscalerOptions",
					"enableInTreeAutoscaling is not true: the operator adds no autoscaler, and these options (but version) are ignored",
					"set enableInTreeAutoscaling: true, or drop the options")
			}
		}
	}
	if a := spec.AuthOptions; a != nil && a.Mode == "" {
		fail("auth-mode-unset", c.prefix+"authOptions.mode",
			"authOptions without a mode: the operator reads auth as on only for mode token, so Ray runs without authentication (no token is given to the pods)",
			"set mode: token (Ray 2.52 or later, with rayVersion set), or mode: disabled")
	}
}

// envSources counts the sources an env var's valueFrom names.
func envSources(v *corev1.EnvVarSource) int {
	n := 0
	for _, set := range []bool{v.FieldRef != nil, v.ResourceFieldRef != nil, v.ConfigMapKeyRef != nil, v.SecretKeyRef != nil, v.FileKeyRef != nil} {
		if set {
			n++
		}
	}
	return n
}

// resourceRules: a group's resources are quantities; the operator skips
// any it cannot parse (common/pod.go updateRayStartParamsResources, with
// a line in its log), so Ray never gets that resource.
func resourceRules(path string, resources map[string]string, fail func(id, path, msg, fix string)) {
	for _, k := range slices.Sorted(maps.Keys(resources)) {
		if _, err := resource.ParseQuantity(resources[k]); err != nil {
			fail("group-resource-quantity", path+"."+k, fmt.Sprintf(
				"%q is not a quantity: the operator skips it (only its log says so), so `ray start` is never given %s", resources[k], k),
				"write a number, such as \"4\" or \"500m\"")
		}
	}
}

// annotationRules: the ray.io annotations the operator compares with one
// value: anything else reads as false.
func annotationRules(annotations map[string]string, warn func(id, path, msg, fix string)) {
	for _, a := range []struct {
		key        string
		ignoreCase bool
	}{
		{operatorbuild.FTEnabledAnnotation, true},
		{operatorbuild.OverwriteContainerCmdAnnotation, true},
		{operatorbuild.EnableServeServiceAnnotation, false},
		{operatorbuild.DisableProvisionedHeadRestartAnnotation, false},
	} {
		v, ok := annotations[a.key]
		if !ok || v == "true" || v == "false" || a.ignoreCase && (strings.EqualFold(v, "true") || strings.EqualFold(v, "false")) {
			continue
		}
		warn("annotation-bool", "metadata.annotations."+a.key, fmt.Sprintf(
			"%q: the operator compares this annotation with \"true\" and reads anything else as false", v), `write "true" or "false"`)
	}
}

// labelRules: the ray.io labels the operator reads by their presence
// alone: the batch schedulers (batchscheduler/yunikorn and
// scheduler-plugins isGangSchedulingEnabled) turn gang scheduling on for
// ray.io/gang-scheduling-enabled of any value.
// On a RayCluster, ray.io/originated-from-crd says which object made it
// (raycluster_controller.go getCreatorCRDType): written by hand — copied
// from a cluster a RayJob or RayService made — the pods are built as for
// that owner (common/pod.go BuildPod) and an upgradeStrategy is refused
// (utils ValidateRayClusterUpgradeOptions).
func labelRules(kind string, labels map[string]string, warn func(id, path, msg, fix string)) {
	if owner := labels[operatorbuild.OriginatedFromCRDLabel]; kind == "RayCluster" && (owner == string(operatorbuild.RayService) || owner == string(operatorbuild.RayJob)) {
		what := "its upgradeStrategy is refused"
		if owner == string(operatorbuild.RayService) {
			what = "the head is labelled as not serving, the workers are ready only once Ray Serve's proxy answers, and an upgradeStrategy is refused"
		}
		warn("originated-from-crd-label", "metadata.labels."+operatorbuild.OriginatedFromCRDLabel, fmt.Sprintf(
			"the operator reads this label to know which object made the cluster: set by hand, it builds this cluster's pods as for one a %s made — %s", owner, what),
			"drop the label (the operator sets it on the clusters RayJobs and RayServices make)")
	}
	if v, ok := labels[operatorbuild.GangSchedulingLabel]; ok && v != "true" {
		warn("gang-scheduling-label", "metadata.labels."+operatorbuild.GangSchedulingLabel, fmt.Sprintf(
			"%q: with YuniKorn or scheduler-plugins as the operator's batch scheduler, only whether this label is there is read, so it turns gang scheduling on", v),
			"drop the label to turn gang scheduling off")
	}
}

// nestedClusterRules: a cluster spec inside a RayJob or RayService
// becomes a RayCluster labelled as theirs, which the RayCluster
// controller then judges by rules the owner's validation does not run.
func nestedClusterRules(prefix, owner string, spec *rayv1.RayClusterSpec, fail func(id, path, msg, fix string)) {
	if spec == nil {
		return
	}
	if u := spec.UpgradeStrategy; u != nil && u.Type != nil {
		fail("nested-upgrade-strategy", prefix+"upgradeStrategy.type", fmt.Sprintf(
			"the %s's RayCluster carries ray.io/originated-from-crd: %s, and the RayCluster controller refuses an upgradeStrategy on such a cluster (InvalidRayClusterSpec): it creates no pod, so the %s never runs",
			owner, owner, owner), "drop upgradeStrategy here (a RayService has its own spec.upgradeStrategy)")
	}
	if spec.Suspend != nil && *spec.Suspend {
		fail("nested-cluster-suspended", prefix+"suspend", fmt.Sprintf(
			"the %s's RayCluster is created suspended: it gets no pods and never becomes ready, and the %s waits for it without end",
			owner, owner), fmt.Sprintf("drop it (to hold a %s, use its own spec.suspend)", owner))
	}
}

// rayJobRules: a RayJob's fields the operator switches on or ignores
// without a word.
func rayJobRules(api APIServer, j *rayv1.RayJob, raw map[string]any, fail, warn func(id, path, msg, fix string)) {
	if len(j.Spec.ClusterSelector) == 0 {
		nestedClusterRules("spec.rayClusterSpec.", "RayJob", j.Spec.RayClusterSpec, fail)
	}
	mode := j.Spec.SubmissionMode
	if mode == rayv1.SidecarMode && j.Spec.RayClusterSpec != nil {
		head := j.Spec.RayClusterSpec.HeadGroupSpec.Template.Spec
		for k, ctr := range slices.Concat(head.InitContainers, head.Containers) {
			if ctr.Name != operatorbuild.SubmitterContainerName {
				continue
			}
			path := fmt.Sprintf("spec.rayClusterSpec.headGroupSpec.template.spec.initContainers[%d].name", k)
			if k >= len(head.InitContainers) {
				path = fmt.Sprintf("spec.rayClusterSpec.headGroupSpec.template.spec.containers[%d].name", k-len(head.InitContainers))
			}
			fail("operator-container-name", path, fmt.Sprintf(
				"in SidecarMode the operator adds a container named %q to the head of the RayCluster it creates for the job: two containers of one name, so the API server refuses the RayCluster and the job never runs",
				ctr.Name), "rename the container")
		}
	}
	switch mode {
	case "", rayv1.K8sJobMode, rayv1.HTTPMode, rayv1.InteractiveMode, rayv1.SidecarMode:
	default:
		fail("submission-mode", "spec.submissionMode", fmt.Sprintf(
			"%q is none of K8sJobMode, HTTPMode, InteractiveMode, SidecarMode: the operator creates the RayCluster and marks the job Running, but no branch submits it — no submitter, no job, until activeDeadlineSeconds",
			mode), "use K8sJobMode (the default)")
	}
	if len(j.Spec.ClusterSelector) > 0 {
		if j.Spec.RayClusterSpec != nil {
			warn("rayjob-field-ignored", "spec.rayClusterSpec", "with clusterSelector the job runs on an existing RayCluster: rayClusterSpec is ignored", "drop one of them")
		}
		for _, k := range slices.Sorted(maps.Keys(j.Spec.ClusterSelector)) {
			if k != operatorbuild.JobClusterSelectorKey {
				warn("rayjob-field-ignored", "spec.clusterSelector."+k, fmt.Sprintf("the operator reads only %s from clusterSelector: %s is ignored", operatorbuild.JobClusterSelectorKey, k), "")
			}
		}
	}
	submitterRules(api, j, fail, warn)
	entrypointRules(j, fail)
	if mode == rayv1.HTTPMode || mode == rayv1.InteractiveMode {
		for _, f := range []string{"submitterPodTemplate", "submitterConfig"} {
			if raw[f] != nil {
				warn("rayjob-field-ignored", "spec."+f, fmt.Sprintf("%s is read only in K8sJobMode: in %s it is ignored", f, mode), "")
			}
		}
	}
}

// submitterRules build what the operator builds to submit a RayJob —
// the `ray job submit` command (common/job.go BuildJobSubmitCommand) and,
// in K8sJobMode, the submitter Job around it (rayjob_controller.go
// createNewK8sJob) — and check them as the operator and the API server
// will. In K8sJobMode both are built once the RayJob's cluster is ready;
// in SidecarMode the command is built before the RayCluster is created.
func submitterRules(api APIServer, j *rayv1.RayJob, fail, warn func(id, path, msg, fix string)) {
	mode := j.Spec.SubmissionMode
	if mode == "" {
		mode = rayv1.K8sJobMode // the CRD's default
	}
	if mode != rayv1.K8sJobMode && mode != rayv1.SidecarMode {
		return
	}
	if cluster := j.Spec.RayClusterSpec; len(j.Spec.Metadata) > 0 && cluster != nil {
		if _, err := operatorbuild.MetadataJSON(j.Spec.Metadata, cluster.RayVersion); err != nil {
			what := "building the submitter fails at every reconcile: the RayJob stays Initializing on a ready cluster and the job is never submitted"
			if mode == rayv1.SidecarMode {
				what = "building the submitter sidecar fails at every reconcile: the operator never creates the RayCluster and the job never runs"
			}
			fail("submit-command", "spec.metadata", fmt.Sprintf(
				"the operator passes metadata to `ray job submit --metadata-json` only for rayVersion 2.6.0 or later, read as a version (here %q: %v): %s",
				cluster.RayVersion, err, what), "set spec.rayClusterSpec.rayVersion to the image's Ray version (2.6.0 or later)")
		}
	}
	if mode != rayv1.K8sJobMode || j.Spec.SubmitterPodTemplate == nil && j.Spec.SubmitterConfig == nil {
		return // the operator's own submitter template is valid
	}
	if t := j.Spec.SubmitterPodTemplate; t != nil && len(t.Spec.Containers) > 0 {
		// rayjob_controller.go configureSubmitterContainer appends these
		// to the first container's env, after the user's.
		// (SetContainerTokenAuthEnvVars adds only what is not there.)
		user := t.Spec.Containers[0]
		built := *user.DeepCopy()
		built.Env = append(built.Env, corev1.EnvVar{Name: "PYTHONUNBUFFERED"}, corev1.EnvVar{Name: operatorbuild.DashboardAddressEnv}, corev1.EnvVar{Name: operatorbuild.JobSubmissionIDEnv})
		if c := j.Spec.RayClusterSpec; c != nil && operatorbuild.AuthOn(c) {
			operatorbuild.SetTokenAuthEnv("cluster", &built, c.AuthOptions) // the cluster's name is a stand-in
		}
		count := func(env []corev1.EnvVar) map[string]int {
			n := map[string]int{}
			for _, e := range env {
				n[e.Name]++
			}
			return n
		}
		written, sent := count(user.Env), count(built.Env)
		for _, name := range slices.Sorted(maps.Keys(sent)) {
			if written[name] > 0 && sent[name] > written[name] {
				warn("operator-env-overrides", "spec.submitterPodTemplate.spec.containers[0].env", fmt.Sprintf(
					"the operator sets %s in the submitter after yours: the later entry wins, so your value is replaced", name),
					"drop it; the operator sets it")
			}
		}
	}
	tmpl := corev1.PodTemplateSpec{}
	if t := j.Spec.SubmitterPodTemplate; t != nil {
		tmpl = *t.DeepCopy()
	} else if c := j.Spec.RayClusterSpec; c != nil && len(c.HeadGroupSpec.Template.Spec.Containers) > 0 {
		// (a head without containers: pod-containers says so)
		tmpl = operatorbuild.SubmitterTemplate(&j.Spec, c)
	}
	job := &batchv1.Job{Spec: batchv1.JobSpec{BackoffLimit: ptr.To[int32](2), Template: tmpl}}
	if c := j.Spec.SubmitterConfig; c != nil && c.BackoffLimit != nil {
		job.Spec.BackoffLimit = c.BackoffLimit
	}
	errs := field.ErrorList{}
	if len(tmpl.Spec.Containers) > 0 { // none: pod-containers says so
		policy := tmpl.Spec.RestartPolicy
		if policy == "" {
			policy = corev1.RestartPolicyAlways // the API server's default for a pod
		}
		if e := api.RestartPolicy("Job", policy, field.NewPath("spec", "template", "spec", "restartPolicy")); e != nil {
			errs = append(errs, e)
		}
	}
	if b := job.Spec.BackoffLimit; b != nil && *b < 0 {
		errs = append(errs, field.Invalid(field.NewPath("spec", "backoffLimit"), *b, "must be greater than or equal to 0"))
	}
	for _, e := range errs {
		path, fix := "spec.submitterPodTemplate.spec.restartPolicy", "set restartPolicy: Never, as the operator's own submitter has"
		if strings.HasPrefix(e.Field, "spec.backoffLimit") {
			path, fix = "spec.submitterConfig.backoffLimit", "use 0 or more (the operator's default is 2)"
		}
		fail("submitter-refused", path, fmt.Sprintf(
			"the operator wraps the submitter in a Job, and the API server refuses it (%s): once the cluster is ready the operator records FailedToCreateRayJobSubmitter at every reconcile, and the job is never submitted",
			e.Error()), fix)
	}
}

// entrypointRules: the entrypoint and its resources go, as written, to
// `ray job submit` (K8sJobMode and SidecarMode: common/job.go
// BuildJobSubmitCommand; Ray's CLI requires an entrypoint after "--" and
// reads --entrypoint-resources as a JSON object of quantities) or to the
// dashboard (HTTPMode: the operator's own
// dashboardclient.ConvertRayJobToReq reads the resources into numbers).
// InteractiveMode's entrypoint comes later.
func entrypointRules(j *rayv1.RayJob, fail func(id, path, msg, fix string)) {
	mode := j.Spec.SubmissionMode
	if mode == "" {
		mode = rayv1.K8sJobMode
	}
	if mode == rayv1.InteractiveMode {
		return
	}
	ownCommand := j.Spec.SubmitterPodTemplate != nil && len(j.Spec.SubmitterPodTemplate.Spec.Containers) > 0 &&
		len(j.Spec.SubmitterPodTemplate.Spec.Containers[0].Command) > 0 // the operator leaves it alone
	if r := j.Spec.EntrypointResources; r != "" && !(mode == rayv1.K8sJobMode && ownCommand) {
		if _, err := dashboardclient.ConvertRayJobToReq(&rayv1.RayJob{Spec: rayv1.RayJobSpec{EntrypointResources: r}}); err != nil {
			fail("entrypoint-resources", "spec.entrypointResources", fmt.Sprintf(
				"%q is not a JSON object of resource quantities (%v): the submission is refused (ray job submit exits with an error; in HTTPMode the operator cannot build its request), so the job never runs",
				r, err), `write a JSON object of numbers, such as '{"TPU": 4}'`)
		}
	}
	if strings.TrimSpace(j.Spec.Entrypoint) == "" && (mode == rayv1.SidecarMode || mode == rayv1.K8sJobMode && !ownCommand) {
		fail("entrypoint-missing", "spec.entrypoint", fmt.Sprintf(
			"no entrypoint: in %s the operator runs `ray job submit ... --` with nothing after it, which ray job submit refuses (it requires the command to run): the submitter fails and the job never runs", mode),
			"give the command to run, such as python train.py (InteractiveMode takes it later)")
	}
}

// faultToleranceRules: what the operator reads of GCS fault tolerance,
// and ignores, by utils.IsGCSFaultToleranceEnabled and common/pod.go
// configureGCSFaultTolerance.
func faultToleranceRules(c clusterContext, spec *rayv1.RayClusterSpec, fail, warn func(id, path, msg, fix string)) {
	// ray start --head --address=<Redis> is Ray's own way to give an
	// external Redis: it wins over RAY_REDIS_ADDRESS.
	_, headAddress := spec.HeadGroupSpec.RayStartParams["address"]
	ft, _ := c.raw["gcsFaultToleranceOptions"].(map[string]any)
	if _, written := ft["redisAddress"]; written && !headAddress && strings.TrimSpace(spec.GcsFaultToleranceOptions.RedisAddress) == "" {
		fail("redis-address-missing", c.prefix+"gcsFaultToleranceOptions.redisAddress", fmt.Sprintf(
			"an empty redisAddress: the operator gives the head %s set to it, which Ray reads as a Redis address and cannot split into host and port, so the head's ray start fails and the head restarts without end",
			operatorbuild.RedisAddressEnv), "give the Redis address, such as redis:6379")
	}
	enabled := operatorbuild.GCSFaultToleranceOn(spec, c.annotations)
	if _, ok := c.annotations[operatorbuild.ExternalStorageNamespaceAnnotation]; ok && !enabled {
		warn("fault-tolerance-ignored", "metadata.annotations."+operatorbuild.ExternalStorageNamespaceAnnotation,
			"GCS fault tolerance is off (no gcsFaultToleranceOptions, no ray.io/ft-enabled: \"true\"): the operator reads the storage namespace only with it on, so it is ignored",
			"turn fault tolerance on with gcsFaultToleranceOptions (and its externalStorageNamespace), or drop the annotation")
	}
	if !enabled || spec.GcsFaultToleranceOptions != nil || len(spec.HeadGroupSpec.Template.Spec.Containers) == 0 {
		return
	}
	head := spec.HeadGroupSpec.Template.Spec.Containers[0]
	if slices.ContainsFunc(head.Env, func(e corev1.EnvVar) bool { return e.Name == operatorbuild.RedisAddressEnv }) || len(head.EnvFrom) > 0 || headAddress {
		return // given by hand (or maybe from a ConfigMap or Secret)
	}
	warn("fault-tolerance-ignored", "metadata.annotations."+operatorbuild.FTEnabledAnnotation, fmt.Sprintf(
		"GCS fault tolerance is on, with no Redis to keep the GCS state in (neither gcsFaultToleranceOptions.redisAddress nor %s on the head): the operator sets it up all the same — a storage namespace, the Redis cleanup finalizer — while the GCS keeps its state in memory, so a head restart loses it",
		operatorbuild.RedisAddressEnv), "use gcsFaultToleranceOptions with redisAddress (and drop the annotation)")
}

// serviceFieldRules: what the operator replaces in a Service given in
// full (headGroupSpec.headService, a RayService's serveService), by
// common/service.go BuildServiceForHeadPod and BuildServeService: the
// selector is always its own, and the namespace the owner's.
func serviceFieldRules(path, namespace string, svc *corev1.Service, warn func(id, path, msg, fix string)) {
	if svc == nil {
		return
	}
	if len(svc.Spec.Selector) > 0 {
		warn("service-field-ignored", path+".spec.selector",
			"the operator replaces this Service's selector with its own (the cluster's head pod, or its serving pods): yours is ignored",
			"drop the selector")
	}
	if svc.Namespace != "" && namespace != "" && svc.Namespace != namespace {
		warn("service-field-ignored", path+".metadata.namespace",
			fmt.Sprintf("the operator creates this Service in the namespace of the object it belongs to (%s): the namespace written here is ignored", namespace),
			"drop the namespace")
	}
}
