package validation

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"gridweave.dev/manifest/validation/operator"
)

// KubeRayVersion is the KubeRay release whose CRDs and rules are embedded.
const KubeRayVersion = operator.KubeRayVersion

func labelsSet(m map[string]string) k8slabels.Set { return k8slabels.Set(m) }

type podTemplate struct {
	path   string
	spec   *corev1.PodSpec
	labels map[string]string
}

// podTemplates finds the pod templates of an object: a Pod, the workload
// kinds, and Ray's head and worker templates (also inside RayJob,
// RayService and RayCronJob).
func podTemplates(u *unstructured.Unstructured) []podTemplate {
	var out []podTemplate
	add := func(path string, m map[string]any) {
		if m == nil {
			return
		}
		tmpl := &corev1.PodTemplateSpec{}
		if err := fromUnstructured(m, tmpl); err != nil {
			return // a shape error; schema validation reports it
		}
		out = append(out, podTemplate{path: path, spec: &tmpl.Spec, labels: tmpl.Labels})
	}
	get := func(path ...string) map[string]any {
		m, _, _ := unstructured.NestedMap(u.Object, path...)
		return m
	}
	ray := func(prefix string, spec map[string]any) {
		if spec == nil {
			return
		}
		head, _, _ := unstructured.NestedMap(spec, "headGroupSpec", "template")
		add(prefix+"headGroupSpec.template", head)
		groups, _, _ := unstructured.NestedSlice(spec, "workerGroupSpecs")
		for i, g := range groups {
			gm, _ := g.(map[string]any)
			t, _, _ := unstructured.NestedMap(gm, "template")
			add(fmt.Sprintf("%sworkerGroupSpecs[%d].template", prefix, i), t)
		}
	}
	switch u.GetKind() {
	case "Pod":
		add("", map[string]any{"metadata": get("metadata"), "spec": get("spec")})
		if len(out) == 1 {
			out[0].path = "spec"
		}
	case "Deployment", "StatefulSet", "DaemonSet", "Job", "ReplicaSet":
		add("spec.template", get("spec", "template"))
	case "RayCluster":
		ray("spec.", get("spec"))
	case "RayJob":
		ray("spec.rayClusterSpec.", get("spec", "rayClusterSpec"))
		add("spec.submitterPodTemplate", get("spec", "submitterPodTemplate"))
	case "RayService":
		ray("spec.rayClusterConfig.", get("spec", "rayClusterConfig"))
	case "RayCronJob":
		ray("spec.jobTemplate.rayClusterSpec.", get("spec", "jobTemplate", "rayClusterSpec"))
	}
	return out
}

// restartPolicies says which restart policies a pod template may have,
// by the kind that owns it: workloads keep pods running, Jobs must name
// one that ends; bare pods and Ray's pods take any of the three.
func restartPolicyFinding(kind string, policy corev1.RestartPolicy, p *field.Path) *field.Error {
	all := []corev1.RestartPolicy{corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever}
	switch kind {
	case "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "ReplicationController":
		if policy != "" && policy != corev1.RestartPolicyAlways { // defaults to Always
			return field.NotSupported(p, policy, []corev1.RestartPolicy{corev1.RestartPolicyAlways})
		}
	case "Job", "CronJob":
		if policy == "" {
			return field.Required(p, `valid values: "OnFailure", "Never"`)
		}
		if policy != corev1.RestartPolicyOnFailure && policy != corev1.RestartPolicyNever {
			return field.NotSupported(p, policy, []corev1.RestartPolicy{corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever})
		}
	default:
		if policy != "" && !slices.Contains(all, policy) {
			return field.NotSupported(p, policy, all)
		}
	}
	return nil
}

// typedPodTemplates are the pod templates of a decoded built-in object:
// a Pod's spec, and every PodTemplateSpec field of any other kind
// (podTemplateFieldsOf).
func typedPodTemplates(obj any) []podTemplate {
	if pod, ok := obj.(*corev1.Pod); ok {
		return []podTemplate{{path: "spec", spec: &pod.Spec, labels: pod.Labels}}
	}
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return nil
	}
	v = v.Elem()
	var out []podTemplate
	for _, f := range podTemplateFieldsOf(v.Type()) {
		fv := v.FieldByIndex(f.index)
		var t *corev1.PodTemplateSpec
		if f.pointer {
			if fv.IsNil() {
				continue
			}
			t = fv.Interface().(*corev1.PodTemplateSpec)
		} else {
			t = fv.Addr().Interface().(*corev1.PodTemplateSpec)
		}
		out = append(out, podTemplate{path: f.path, spec: &t.Spec, labels: t.Labels})
	}
	return out
}

// podTemplateFindings are the checks no schema makes inside a pod
// template — the API server's pod validation the users' mistakes hit
// most, with its paths and words — which for a custom resource surface
// only when the operator creates the pod. kind is the owner's kind.
func podTemplateFindings(obj, kind, path string, spec *corev1.PodSpec, lbls map[string]string) []Finding {
	var out []Finding
	errorAt := func(id, p, msg, fix string) {
		out = append(out, Finding{ID: id, Severity: SeverityError, Object: obj, Path: p, Message: msg, Fix: fix})
	}
	fieldError := func(id string, e *field.Error, fix string) {
		errorAt(id, e.Field, strings.TrimPrefix(e.ErrorBody(), e.Field+": "), fix)
	}
	warnAt := func(id, p, msg, fix string) {
		out = append(out, Finding{ID: id, Severity: SeverityWarning, Object: obj, Path: p, Message: msg, Fix: fix})
	}
	specPath := path + ".spec"
	if path == "spec" {
		specPath = "spec"
	}
	sp := pathOf(specPath)
	for k, v := range lbls {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			errorAt("pod-label", path+".metadata.labels", fmt.Sprintf("label key %q: %s", k, errs[0]), "")
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			errorAt("pod-label", path+".metadata.labels."+k, fmt.Sprintf("label value %q: %s", v, errs[0]), "")
		}
	}
	if len(spec.Containers) == 0 {
		errorAt("pod-containers", specPath+".containers", "at least one container is required", "")
	}
	if e := restartPolicyFinding(kind, spec.RestartPolicy, sp.Child("restartPolicy")); e != nil {
		fieldError("restart-policy", e, "")
	}
	switch spec.DNSPolicy {
	case "", corev1.DNSClusterFirst, corev1.DNSClusterFirstWithHostNet, corev1.DNSDefault, corev1.DNSNone:
	default:
		fieldError("pod-spec", field.NotSupported(sp.Child("dnsPolicy"), spec.DNSPolicy, []corev1.DNSPolicy{corev1.DNSClusterFirstWithHostNet, corev1.DNSClusterFirst, corev1.DNSDefault, corev1.DNSNone}), "")
	}
	volumes := map[string]bool{}
	for i, v := range spec.Volumes {
		p := sp.Child("volumes").Index(i).Child("name")
		switch {
		case v.Name == "":
			fieldError("volume", field.Required(p, ""), "")
		case len(validation.IsDNS1123Label(v.Name)) > 0:
			fieldError("volume", field.Invalid(p, v.Name, validation.IsDNS1123Label(v.Name)[0]), "use lowercase letters, digits and '-'")
		case volumes[v.Name]:
			fieldError("volume", field.Duplicate(p, v.Name), "")
		}
		volumes[v.Name] = true
	}
	for i, t := range spec.Tolerations {
		p := sp.Child("tolerations").Index(i)
		if t.Key == "" && t.Operator != corev1.TolerationOpExists {
			fieldError("toleration", field.Invalid(p.Child("operator"), t.Operator, "operator must be Exists when `key` is empty, which means \"match all values and all keys\""), "")
		}
		switch t.Operator {
		case corev1.TolerationOpEqual, "":
			if errs := validation.IsValidLabelValue(t.Value); len(errs) > 0 {
				fieldError("toleration", field.Invalid(p.Child("operator"), t.Value, strings.Join(errs, ";")), "")
			}
		case corev1.TolerationOpExists:
			if t.Value != "" {
				fieldError("toleration", field.Invalid(p.Child("operator"), t.Value, "value must be empty when `operator` is 'Exists'"), "drop the value, or use operator: Equal")
			}
		default:
			fieldError("toleration", field.NotSupported(p.Child("operator"), t.Operator, []corev1.TolerationOperator{corev1.TolerationOpEqual, corev1.TolerationOpExists}), "")
		}
		switch t.Effect {
		case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			fieldError("toleration", field.NotSupported(p.Child("effect"), t.Effect, []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}), "")
		}
		if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
			fieldError("toleration", field.Invalid(p.Child("effect"), t.Effect, "effect must be 'NoExecute' when `tolerationSeconds` is set"), "")
		}
	}
	names := map[string]bool{}
	podPorts := map[string]bool{}
	check := func(kind string, i int, c corev1.Container) {
		containerPorts := map[string]bool{}
		p := fmt.Sprintf("%s.%s[%d]", specPath, kind, i)
		cp := sp.Child(kind).Index(i)
		if errs := validation.IsDNS1123Label(c.Name); len(errs) > 0 {
			errorAt("container-name", p+".name", fmt.Sprintf("%q: %s", c.Name, errs[0]), "use lowercase letters, digits and '-'")
		} else if names[c.Name] {
			errorAt("container-name", p+".name", fmt.Sprintf("%q is used by two containers", c.Name), "")
		}
		names[c.Name] = true
		if c.Image == "" && kind == "containers" {
			errorAt("container-image", p+".image", "is required", "")
		}
		switch c.ImagePullPolicy {
		case "", corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
		default:
			fieldError("container", field.NotSupported(cp.Child("imagePullPolicy"), c.ImagePullPolicy, []corev1.PullPolicy{corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever}), "")
		}
		for j, port := range c.Ports {
			pp := cp.Child("ports").Index(j)
			if port.Name != "" {
				if errs := validation.IsValidPortName(port.Name); len(errs) > 0 {
					fieldError("container-port", field.Invalid(pp.Child("name"), port.Name, errs[0]), "use at most 15 lowercase letters, digits and '-'")
				} else if containerPorts[port.Name] {
					fieldError("container-port", field.Duplicate(pp.Child("name"), port.Name), "")
				} else if podPorts[port.Name] {
					warnAt("duplicate-port-name", pp.Child("name").String(), fmt.Sprintf("%q names a port of another container too; Services and probes that select ports by name use the first", port.Name), "name ports uniquely in the pod")
				}
				containerPorts[port.Name], podPorts[port.Name] = true, true
			}
			if errs := validation.IsValidPortNum(int(port.ContainerPort)); len(errs) > 0 && port.ContainerPort != 0 {
				fieldError("container-port", field.Invalid(pp.Child("containerPort"), port.ContainerPort, errs[0]), "")
			}
			switch port.Protocol {
			case "", corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP:
			default:
				fieldError("container-port", field.NotSupported(pp.Child("protocol"), port.Protocol, []corev1.Protocol{corev1.ProtocolSCTP, corev1.ProtocolTCP, corev1.ProtocolUDP}), "")
			}
		}
		mountPaths := map[string]bool{}
		for j, m := range c.VolumeMounts {
			mp := cp.Child("volumeMounts").Index(j)
			if !volumes[m.Name] {
				fieldError("volume-mount", field.NotFound(mp.Child("name"), m.Name), "declare the volume in spec.volumes")
			}
			if m.MountPath != "" && mountPaths[m.MountPath] {
				fieldError("volume-mount", field.Invalid(mp.Child("mountPath"), m.MountPath, "must be unique"), "")
			}
			mountPaths[m.MountPath] = true
		}
		env := map[string]bool{}
		for j, e := range c.Env {
			if env[e.Name] {
				warnAt("duplicate-env", fmt.Sprintf("%s.env[%d].name", p, j), fmt.Sprintf("%q is set twice; the last value wins", e.Name), "remove one")
			}
			env[e.Name] = true
			if e.Name == "" {
				continue // the schema requires it
			}
			if errs := validation.IsRelaxedEnvVarName(e.Name); len(errs) > 0 {
				errorAt("env-name", fmt.Sprintf("%s.env[%d].name", p, j), fmt.Sprintf("%q: %s", e.Name, errs[0]), "")
			}
			if e.Value != "" && e.ValueFrom != nil {
				fieldError("env-value", field.Invalid(cp.Child("env").Index(j).Child("valueFrom"), "", "may not be specified when `value` is not empty"), "keep value or valueFrom")
			}
			if why := literalSecret(e.Name, e.Value); why != "" {
				warnAt("literal-secret", fmt.Sprintf("%s.env[%d].value", p, j), fmt.Sprintf("%s, written in the manifest: anyone who reads the manifest or the pod spec reads it", why),
					fmt.Sprintf("put it in a Secret and set env[%d].valueFrom.secretKeyRef", j))
			}
		}
		for _, list := range []struct {
			name string
			args []string
		}{{"command", c.Command}, {"args", c.Args}} {
			for j, a := range list.args {
				name, value, isFlag := strings.Cut(strings.TrimLeft(a, "-"), "=")
				if !isFlag || !strings.HasPrefix(a, "-") {
					name, value = "", a
				}
				if why := literalSecret(strings.ReplaceAll(strings.ToUpper(name), "-", "_"), value); why != "" {
					warnAt("literal-secret", fmt.Sprintf("%s.%s[%d]", p, list.name, j), fmt.Sprintf("%s on the command line: anyone who reads the manifest, the pod spec or the node's process list reads it", why),
						"put it in a Secret and pass it as an environment variable from valueFrom.secretKeyRef ($(NAME) in args)")
				}
			}
		}
		for _, list := range []struct {
			name   string
			values corev1.ResourceList
		}{{"limits", c.Resources.Limits}, {"requests", c.Resources.Requests}} {
			for name, q := range list.values {
				if q.Sign() < 0 {
					fieldError("resources", field.Invalid(cp.Child("resources", list.name).Key(string(name)), q.String(), "must be greater than or equal to 0"), "")
				}
			}
		}
		for _, pr := range [...]struct {
			name  string
			probe *corev1.Probe
		}{{"livenessProbe", c.LivenessProbe}, {"readinessProbe", c.ReadinessProbe}, {"startupProbe", c.StartupProbe}} {
			probe := pr.probe
			if probe == nil {
				continue
			}
			pp := cp.Child(pr.name)
			if h := probe.HTTPGet; h != nil {
				for _, e := range portNumOrName(h.Port, pp.Child("httpGet", "port")) {
					fieldError("probe", e, "")
				}
			}
			if tcp := probe.TCPSocket; tcp != nil {
				for _, e := range portNumOrName(tcp.Port, pp.Child("tcpSocket", "port")) {
					fieldError("probe", e, "")
				}
			}
		}
		for name, req := range c.Resources.Requests {
			lim, hasLimit := c.Resources.Limits[name]
			extended := strings.Contains(string(name), "/") && !strings.HasPrefix(string(name), "kubernetes.io/")
			if extended && !hasLimit {
				fix := fmt.Sprintf("set resources.limits.%s (requests default to limits for extended resources)", name)
				msg := fmt.Sprintf("Required value: Limit must be set for non overcommitable resources (%s is requested)", name)
				if strings.HasSuffix(string(name), "gpu") {
					errorAt("gpu-request-only", p+".resources.limits", msg+"; Ray reads GPUs from limits only", fix)
				} else {
					errorAt("extended-request-only", p+".resources.limits", msg, fix)
				}
				continue
			}
			if hasLimit && req.Cmp(lim) > 0 {
				errorAt("request-above-limit", p+".resources.requests."+string(name), fmt.Sprintf("request %s is above limit %s", req.String(), lim.String()), "")
			}
			if extended && hasLimit && req.Cmp(lim) != 0 {
				errorAt("extended-request-limit", p+".resources.requests."+string(name), "an extended resource's request must equal its limit", "")
			}
		}
	}
	for i, c := range spec.InitContainers {
		check("initContainers", i, c)
	}
	for i, c := range spec.Containers {
		check("containers", i, c)
	}
	return out
}

// pathOf turns a dotted path with indexes back into a field.Path.
func pathOf(p string) *field.Path {
	var out *field.Path
	for _, part := range strings.Split(p, ".") {
		name, rest, _ := strings.Cut(part, "[")
		if out == nil {
			out = field.NewPath(name)
		} else {
			out = out.Child(name)
		}
		for rest != "" {
			idx, after, _ := strings.Cut(rest, "]")
			n := 0
			fmt.Sscanf(idx, "%d", &n)
			out = out.Index(n)
			rest = strings.TrimPrefix(after, "[")
		}
	}
	return out
}

// secretName matches the names of variables and flags that hold secrets.
var secretName = regexp.MustCompile(`(^|_)(TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIALS?|AUTH_?KEY|CLIENT_SECRET)(_|$)`)

// secretShapes are values that are secrets whatever they are called.
var secretShapes = []struct {
	what string
	re   *regexp.Regexp
}{
	{"a GitHub token", regexp.MustCompile(`\b(ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,}\b|\bgithub_pat_[A-Za-z0-9_]{40,}`)},
	{"an AWS access key", regexp.MustCompile(`\b(AKIA|ASIA)[0-9A-Z]{16}\b`)},
	{"a Hugging Face token", regexp.MustCompile(`\bhf_[A-Za-z0-9]{30,}\b`)},
	{"an OpenAI-style API key", regexp.MustCompile(`(^|[=:\s"'])sk-[A-Za-z0-9_-]{20,}`)},
	{"a Slack token", regexp.MustCompile(`\bxox[abprs]-[A-Za-z0-9-]{10,}`)},
	{"a private key", regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----`)},
	{"a JSON Web Token", regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}`)},
}

// notASecretName are names of variables and flags that say where a secret
// is, or how long, not what it is.
var notASecretName = regexp.MustCompile(`_(FILE|PATH|DIR|URL|URI|ENDPOINT|HOST|NAME|REF|LENGTH|SIZE|TTL|SECONDS|MINUTES|ENABLED|REQUIRED|MODE|TYPE)$`)

// notASecretValue are values no secret has: references to variables, URLs,
// paths, file names, numbers.
var notASecretValue = regexp.MustCompile(`^(\$\(|\$\{|\$[A-Za-z_])|://|^\.{0,2}/|^[\w.-]+\.(json|pem|key|crt|cert|yaml|yml|txt|p12)$|^[0-9]+$`)

// literalSecret says why a value (of a variable or flag called name) is a
// secret written out, or "" when it does not look like one: a reference
// ($(VAR), ${VAR}, $VAR), a URL, a path or file name, a number, a boolean,
// a value shorter than 8 characters, or a name that says where a secret
// is (…_FILE, …_NAME, …_URL) is not.
func literalSecret(name, value string) string {
	for _, s := range secretShapes {
		if s.re.MatchString(value) {
			return "the value is " + s.what
		}
	}
	v := strings.TrimSpace(value)
	upper := strings.ToUpper(name)
	if name == "" || !secretName.MatchString(upper) || notASecretName.MatchString(upper) || len(v) < 8 ||
		notASecretValue.MatchString(v) || strings.EqualFold(v, "true") || strings.EqualFold(v, "false") {
		return ""
	}
	return fmt.Sprintf("%s looks like a secret by its name", name)
}
