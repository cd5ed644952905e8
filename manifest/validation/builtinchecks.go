package validation

import (
	"fmt"
	"net"
	"strings"

	"github.com/robfig/cron/v3"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// builtinSemantics are the API server's checks on the built-in kinds that
// sit next to Ray clusters, beyond the shape its strict decoding checks:
// the mistakes users make most, each with the server's path and words
// (pod templates are checked apart, in podTemplateFindings).
// TestLintAgreesWithTheRealSystems holds them to a real API server.
func builtinSemantics(obj any, errorAt func(id, path, msg, fix string) Finding) []Finding {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	switch o := obj.(type) {
	case *appsv1.Deployment:
		errs = append(errs, nonNegative(spec.Child("replicas"), o.Spec.Replicas)...)
		errs = append(errs, selectorMatches("deployment", spec, o.Spec.Selector, o.Spec.Template.Labels)...)
	case *appsv1.StatefulSet:
		errs = append(errs, nonNegative(spec.Child("replicas"), o.Spec.Replicas)...)
		errs = append(errs, selectorMatches("statefulset", spec, o.Spec.Selector, o.Spec.Template.Labels)...)
	case *appsv1.DaemonSet:
		errs = append(errs, selectorMatches("daemonset", spec, o.Spec.Selector, o.Spec.Template.Labels)...)
	case *batchv1.Job:
		errs = append(errs, nonNegative(spec.Child("parallelism"), o.Spec.Parallelism)...)
		errs = append(errs, nonNegative(spec.Child("completions"), o.Spec.Completions)...)
		errs = append(errs, nonNegative(spec.Child("backoffLimit"), o.Spec.BackoffLimit)...)
		errs = append(errs, nonNegative(spec.Child("ttlSecondsAfterFinished"), o.Spec.TTLSecondsAfterFinished)...)
		if d := o.Spec.ActiveDeadlineSeconds; d != nil && *d <= 0 {
			errs = append(errs, field.Invalid(spec.Child("activeDeadlineSeconds"), *d, "must be greater than 0"))
		}
	case *batchv1.CronJob:
		errs = append(errs, cronJobErrors(o)...)
	case *autoscalingv2.HorizontalPodAutoscaler:
		if o.Spec.MinReplicas != nil && *o.Spec.MinReplicas < 1 {
			errs = append(errs, field.Invalid(spec.Child("minReplicas"), *o.Spec.MinReplicas, "must be greater than or equal to 1"))
		}
		if o.Spec.MaxReplicas < 1 {
			errs = append(errs, field.Invalid(spec.Child("maxReplicas"), o.Spec.MaxReplicas, "must be greater than 0"))
		}
		if o.Spec.MinReplicas != nil && o.Spec.MaxReplicas < *o.Spec.MinReplicas {
			errs = append(errs, field.Invalid(spec.Child("maxReplicas"), o.Spec.MaxReplicas, "must be greater than or equal to `minReplicas`"))
		}
		ref := spec.Child("scaleTargetRef")
		if o.Spec.ScaleTargetRef.Kind == "" {
			errs = append(errs, field.Required(ref.Child("kind"), ""))
		}
		if o.Spec.ScaleTargetRef.Name == "" {
			errs = append(errs, field.Required(ref.Child("name"), ""))
		}
	case *corev1.Service:
		errs = append(errs, serviceErrors(o)...)
	case *corev1.PersistentVolumeClaim:
		errs = append(errs, claimErrors(o)...)
	case *corev1.ConfigMap:
		errs = append(errs, dataKeys("data", o.Data)...)
		errs = append(errs, dataKeys("binaryData", o.BinaryData)...)
		for k := range o.BinaryData {
			if _, twice := o.Data[k]; twice {
				errs = append(errs, field.Invalid(field.NewPath("data").Key(k), k, "duplicate of key present in binaryData"))
			}
		}
	case *corev1.Secret:
		// stringData is merged into data before validation.
		errs = append(errs, dataKeys("data", o.StringData)...)
		errs = append(errs, dataKeys("data", o.Data)...)
	case *networkingv1.NetworkPolicy:
		errs = append(errs, networkPolicyErrors(o)...)
	case *networkingv1.Ingress:
		errs = append(errs, ingressErrors(o)...)
	case *policyv1.PodDisruptionBudget:
		if o.Spec.MinAvailable != nil && o.Spec.MaxUnavailable != nil {
			errs = append(errs, field.Invalid(spec, o.Spec, "minAvailable and maxUnavailable cannot be both set"))
		}
	case *rbacv1.Role:
		for i, r := range o.Rules {
			errs = append(errs, policyRuleErrors(r, true, field.NewPath("rules").Index(i))...)
		}
	case *rbacv1.ClusterRole:
		for i, r := range o.Rules {
			errs = append(errs, policyRuleErrors(r, false, field.NewPath("rules").Index(i))...)
		}
	case *rbacv1.RoleBinding:
		errs = append(errs, roleRefErrors(o.RoleRef, []string{"Role", "ClusterRole"})...)
		for i, s := range o.Subjects {
			errs = append(errs, subjectErrors(s, true, field.NewPath("subjects").Index(i))...)
		}
	case *rbacv1.ClusterRoleBinding:
		errs = append(errs, roleRefErrors(o.RoleRef, []string{"ClusterRole"})...)
		for i, s := range o.Subjects {
			errs = append(errs, subjectErrors(s, false, field.NewPath("subjects").Index(i))...)
		}
	}
	out := make([]Finding, 0, len(errs))
	for _, e := range errs {
		out = append(out, errorAt("schema", e.Field, strings.TrimPrefix(e.ErrorBody(), e.Field+": "), ""))
	}
	return out
}

func nonNegative[T int32 | int64](p *field.Path, v *T) field.ErrorList {
	if v != nil && *v < 0 {
		return field.ErrorList{field.Invalid(p, *v, "must be greater than or equal to 0")}
	}
	return nil
}

// selectorMatches: a workload's selector is valid, not empty, and
// selects its own pod template. A Deployment must have one; for the
// others a missing selector matches nothing.
func selectorMatches(kind string, spec *field.Path, sel *metav1.LabelSelector, templateLabels map[string]string) field.ErrorList {
	if sel == nil && kind == "deployment" {
		return field.ErrorList{field.Required(spec.Child("selector"), "")}
	}
	errs := metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{}, spec.Child("selector"))
	if len(errs) > 0 {
		return errs
	}
	selector, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return field.ErrorList{field.Invalid(spec.Child("selector"), sel, err.Error())}
	}
	if sel != nil && len(sel.MatchLabels)+len(sel.MatchExpressions) == 0 {
		return field.ErrorList{field.Invalid(spec.Child("selector"), sel, "empty selector is invalid for "+kind)}
	}
	if !selector.Matches(labelsSet(templateLabels)) {
		return field.ErrorList{field.Invalid(spec.Child("template", "metadata", "labels"), templateLabels, "`selector` does not match template `labels`")}
	}
	return nil
}

func serviceErrors(o *corev1.Service) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	switch o.Spec.Type {
	case "", corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
	case corev1.ServiceTypeExternalName:
		if o.Spec.ExternalName == "" {
			errs = append(errs, field.Required(spec.Child("externalName"), ""))
		} else if msgs := validation.IsDNS1123Subdomain(strings.TrimSuffix(o.Spec.ExternalName, ".")); len(msgs) > 0 {
			errs = append(errs, field.Invalid(spec.Child("externalName"), o.Spec.ExternalName, msgs[0]))
		}
	default:
		errs = append(errs, field.NotSupported(spec.Child("type"), o.Spec.Type, []corev1.ServiceType{corev1.ServiceTypeClusterIP, corev1.ServiceTypeExternalName, corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeNodePort}))
	}
	if o.Spec.Type != corev1.ServiceTypeExternalName {
		if len(o.Spec.Ports) == 0 && o.Spec.ClusterIP != corev1.ClusterIPNone {
			errs = append(errs, field.Required(spec.Child("ports"), ""))
		}
		if o.Spec.ClusterIP == corev1.ClusterIPNone && (o.Spec.Type == corev1.ServiceTypeLoadBalancer || o.Spec.Type == corev1.ServiceTypeNodePort) {
			errs = append(errs, field.Invalid(spec.Child("clusterIPs").Index(0), o.Spec.ClusterIP, fmt.Sprintf("may not be set to 'None' for %s services", o.Spec.Type)))
		}
	}
	names := map[string]bool{}
	type portKey struct {
		port     int32
		protocol corev1.Protocol
	}
	ports := map[portKey]bool{}
	for i, p := range o.Spec.Ports {
		pp := spec.Child("ports").Index(i)
		key := portKey{p.Port, p.Protocol}
		if key.protocol == "" {
			key.protocol = corev1.ProtocolTCP // the API server's default, filled in before it validates
		}
		if ports[key] {
			errs = append(errs, field.Duplicate(pp, fmt.Sprintf("%d/%s", key.port, key.protocol)))
		}
		ports[key] = true
		if len(o.Spec.Ports) > 1 && p.Name == "" {
			errs = append(errs, field.Required(pp.Child("name"), ""))
		} else if p.Name != "" {
			if msgs := validation.IsDNS1123Label(p.Name); len(msgs) > 0 {
				errs = append(errs, field.Invalid(pp.Child("name"), p.Name, msgs[0]))
			} else if names[p.Name] {
				errs = append(errs, field.Duplicate(pp.Child("name"), p.Name))
			}
			names[p.Name] = true
		}
		for _, msg := range validation.IsValidPortNum(int(p.Port)) {
			errs = append(errs, field.Invalid(pp.Child("port"), p.Port, msg))
		}
		switch p.Protocol {
		case "", corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP:
		default:
			errs = append(errs, field.NotSupported(pp.Child("protocol"), p.Protocol, []corev1.Protocol{corev1.ProtocolSCTP, corev1.ProtocolTCP, corev1.ProtocolUDP}))
		}
		if p.TargetPort != (intstr.IntOrString{}) {
			errs = append(errs, portNumOrName(p.TargetPort, pp.Child("targetPort"))...)
		}
	}
	errs = append(errs, metav1validation.ValidateLabels(o.Spec.Selector, spec.Child("selector"))...)
	return errs
}

func cronJobErrors(o *batchv1.CronJob) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	switch {
	case o.Spec.Schedule == "":
		errs = append(errs, field.Required(spec.Child("schedule"), ""))
	case strings.Contains(o.Spec.Schedule, "TZ=") || strings.Contains(o.Spec.Schedule, "CRON_TZ="):
		errs = append(errs, field.Invalid(spec.Child("schedule"), o.Spec.Schedule, "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"))
	default:
		if _, err := cron.ParseStandard(o.Spec.Schedule); err != nil {
			errs = append(errs, field.Invalid(spec.Child("schedule"), o.Spec.Schedule, err.Error()))
		}
	}
	switch o.Spec.ConcurrencyPolicy {
	case "", batchv1.AllowConcurrent, batchv1.ForbidConcurrent, batchv1.ReplaceConcurrent:
	default:
		errs = append(errs, field.NotSupported(spec.Child("concurrencyPolicy"), o.Spec.ConcurrencyPolicy, []batchv1.ConcurrencyPolicy{batchv1.AllowConcurrent, batchv1.ForbidConcurrent, batchv1.ReplaceConcurrent}))
	}
	errs = append(errs, nonNegative(spec.Child("startingDeadlineSeconds"), o.Spec.StartingDeadlineSeconds)...)
	errs = append(errs, nonNegative(spec.Child("successfulJobsHistoryLimit"), o.Spec.SuccessfulJobsHistoryLimit)...)
	errs = append(errs, nonNegative(spec.Child("failedJobsHistoryLimit"), o.Spec.FailedJobsHistoryLimit)...)
	job := spec.Child("jobTemplate", "spec")
	errs = append(errs, nonNegative(job.Child("backoffLimit"), o.Spec.JobTemplate.Spec.BackoffLimit)...)
	errs = append(errs, nonNegative(job.Child("parallelism"), o.Spec.JobTemplate.Spec.Parallelism)...)
	return errs
}

// portNumOrName is the API server's ValidatePortNumOrName.
func portNumOrName(port intstr.IntOrString, p *field.Path) field.ErrorList {
	if port.Type == intstr.Int {
		var errs field.ErrorList
		for _, msg := range validation.IsValidPortNum(port.IntValue()) {
			errs = append(errs, field.Invalid(p, port.IntValue(), msg))
		}
		return errs
	}
	var errs field.ErrorList
	for _, msg := range validation.IsValidPortName(port.StrVal) {
		errs = append(errs, field.Invalid(p, port.StrVal, msg))
	}
	return errs
}

func claimErrors(o *corev1.PersistentVolumeClaim) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if len(o.Spec.AccessModes) == 0 {
		errs = append(errs, field.Required(spec.Child("accessModes"), "at least 1 access mode is required"))
	}
	modes := []corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany, corev1.ReadWriteMany, corev1.ReadWriteOnce, corev1.ReadWriteOncePod}
	for _, m := range o.Spec.AccessModes {
		switch m {
		case corev1.ReadOnlyMany, corev1.ReadWriteMany, corev1.ReadWriteOnce, corev1.ReadWriteOncePod:
		default:
			errs = append(errs, field.NotSupported(spec.Child("accessModes"), m, modes))
		}
	}
	storage, ok := o.Spec.Resources.Requests[corev1.ResourceStorage]
	if !ok {
		errs = append(errs, field.Required(spec.Child("resources").Key(string(corev1.ResourceStorage)), ""))
	} else if storage.Sign() <= 0 {
		errs = append(errs, field.Invalid(spec.Child("resources").Key(string(corev1.ResourceStorage)), storage.String(), "must be greater than zero"))
	}
	return errs
}

// dataKeys: ConfigMap and Secret keys are file names.
func dataKeys[V any](name string, data map[string]V) field.ErrorList {
	var errs field.ErrorList
	for k := range data {
		for _, msg := range validation.IsConfigMapKey(k) {
			errs = append(errs, field.Invalid(field.NewPath(name).Key(k), k, msg))
		}
	}
	return errs
}

func networkPolicyErrors(o *networkingv1.NetworkPolicy) field.ErrorList {
	var errs field.ErrorList
	peers := func(p *field.Path, ps []networkingv1.NetworkPolicyPeer) {
		for j, peer := range ps {
			b := peer.IPBlock
			if b == nil {
				continue
			}
			bp := p.Index(j).Child("ipBlock")
			_, block, err := net.ParseCIDR(b.CIDR)
			if err != nil {
				errs = append(errs, field.Invalid(bp.Child("cidr"), b.CIDR, "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"))
				continue
			}
			for k, ex := range b.Except {
				_, exBlock, err := net.ParseCIDR(ex)
				if err != nil {
					errs = append(errs, field.Invalid(bp.Child("except").Index(k), ex, "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"))
					continue
				}
				bOnes, _ := block.Mask.Size()
				eOnes, _ := exBlock.Mask.Size()
				if !block.Contains(exBlock.IP) || eOnes <= bOnes {
					errs = append(errs, field.Invalid(bp.Child("except").Index(k), ex, "must be a strict subset of `cidr`"))
				}
			}
		}
	}
	ports := func(p *field.Path, ps []networkingv1.NetworkPolicyPort) {
		for j, port := range ps {
			pp := p.Index(j)
			if port.Protocol != nil && *port.Protocol != corev1.ProtocolTCP && *port.Protocol != corev1.ProtocolUDP && *port.Protocol != corev1.ProtocolSCTP {
				errs = append(errs, field.NotSupported(pp.Child("protocol"), *port.Protocol, []corev1.Protocol{corev1.ProtocolSCTP, corev1.ProtocolTCP, corev1.ProtocolUDP}))
			}
			if port.Port != nil {
				errs = append(errs, portNumOrName(*port.Port, pp.Child("port"))...)
			}
			if port.EndPort != nil && (port.Port == nil || port.Port.Type != intstr.Int || *port.EndPort < port.Port.IntVal) {
				errs = append(errs, field.Invalid(pp.Child("endPort"), *port.EndPort, "must be a port number not below `port`, which must be a number"))
			}
		}
	}
	spec := field.NewPath("spec")
	for i, r := range o.Spec.Ingress {
		peers(spec.Child("ingress").Index(i).Child("from"), r.From)
		ports(spec.Child("ingress").Index(i).Child("ports"), r.Ports)
	}
	for i, r := range o.Spec.Egress {
		peers(spec.Child("egress").Index(i).Child("to"), r.To)
		ports(spec.Child("egress").Index(i).Child("ports"), r.Ports)
	}
	return errs
}

func ingressErrors(o *networkingv1.Ingress) field.ErrorList {
	var errs field.ErrorList
	backend := func(p *field.Path, b *networkingv1.IngressBackend) {
		if b == nil {
			return
		}
		switch {
		case b.Service != nil && b.Resource != nil:
			errs = append(errs, field.Invalid(p, "", "cannot set both resource and service backends"))
		case b.Service == nil && b.Resource == nil:
			errs = append(errs, field.Invalid(p, "", "resource or service backend is required"))
		case b.Service != nil:
			sp := p.Child("service", "port")
			switch {
			case b.Service.Port.Name != "" && b.Service.Port.Number != 0:
				errs = append(errs, field.Invalid(sp, b.Service.Port, "cannot set both port name & port number"))
			case b.Service.Port.Name != "":
				for _, msg := range validation.IsValidPortName(b.Service.Port.Name) {
					errs = append(errs, field.Invalid(sp.Child("name"), b.Service.Port.Name, msg))
				}
			case b.Service.Port.Number != 0:
				for _, msg := range validation.IsValidPortNum(int(b.Service.Port.Number)) {
					errs = append(errs, field.Invalid(sp.Child("number"), b.Service.Port.Number, msg))
				}
			default:
				errs = append(errs, field.Required(sp, "port name or number is required"))
			}
		}
	}
	spec := field.NewPath("spec")
	if c := o.Spec.IngressClassName; c != nil {
		for _, msg := range apivalidation.NameIsDNSSubdomain(*c, false) {
			errs = append(errs, field.Invalid(spec.Child("ingressClassName"), *c, msg))
		}
	}
	backend(spec.Child("defaultBackend"), o.Spec.DefaultBackend)
	for i, r := range o.Spec.Rules {
		if r.HTTP == nil {
			continue
		}
		for j, path := range r.HTTP.Paths {
			pp := spec.Child("rules").Index(i).Child("http", "paths").Index(j)
			switch {
			case path.PathType == nil:
				errs = append(errs, field.Required(pp.Child("pathType"), "pathType must be specified"))
			case *path.PathType == networkingv1.PathTypeExact || *path.PathType == networkingv1.PathTypePrefix:
				if !strings.HasPrefix(path.Path, "/") {
					errs = append(errs, field.Invalid(pp.Child("path"), path.Path, "must be an absolute path"))
				}
				for _, seq := range []string{"//", "/./", "/../", "%2f", "%2F"} {
					if strings.Contains(path.Path, seq) {
						errs = append(errs, field.Invalid(pp.Child("path"), path.Path, fmt.Sprintf("must not contain '%s'", seq)))
					}
				}
				for _, suffix := range []string{"/..", "/."} {
					if strings.HasSuffix(path.Path, suffix) {
						errs = append(errs, field.Invalid(pp.Child("path"), path.Path, fmt.Sprintf("cannot end with '%s'", suffix)))
					}
				}
			case *path.PathType == networkingv1.PathTypeImplementationSpecific:
				if path.Path != "" && !strings.HasPrefix(path.Path, "/") {
					errs = append(errs, field.Invalid(pp.Child("path"), path.Path, "must be an absolute path"))
				}
			default:
				errs = append(errs, field.NotSupported(pp.Child("pathType"), *path.PathType, []networkingv1.PathType{networkingv1.PathTypeExact, networkingv1.PathTypeImplementationSpecific, networkingv1.PathTypePrefix}))
			}
			backend(pp.Child("backend"), &path.Backend)
		}
	}
	return errs
}

func policyRuleErrors(r rbacv1.PolicyRule, namespaced bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(r.Verbs) == 0 {
		errs = append(errs, field.Required(p.Child("verbs"), "verbs must contain at least one value"))
	}
	if len(r.NonResourceURLs) > 0 {
		if namespaced {
			errs = append(errs, field.Invalid(p.Child("nonResourceURLs"), r.NonResourceURLs, "namespaced rules cannot apply to non-resource URLs"))
		}
		if len(r.APIGroups) > 0 || len(r.Resources) > 0 || len(r.ResourceNames) > 0 {
			errs = append(errs, field.Invalid(p.Child("nonResourceURLs"), r.NonResourceURLs, "rules cannot apply to both regular resources and non-resource URLs"))
		}
		return errs
	}
	if len(r.APIGroups) == 0 {
		errs = append(errs, field.Required(p.Child("apiGroups"), "resource rules must supply at least one api group"))
	}
	if len(r.Resources) == 0 {
		errs = append(errs, field.Required(p.Child("resources"), "resource rules must supply at least one resource"))
	}
	return errs
}

func roleRefErrors(ref rbacv1.RoleRef, kinds []string) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("roleRef")
	if ref.APIGroup != rbacv1.GroupName {
		errs = append(errs, field.NotSupported(p.Child("apiGroup"), ref.APIGroup, []string{rbacv1.GroupName}))
	}
	known := false
	for _, k := range kinds {
		known = known || ref.Kind == k
	}
	if !known {
		errs = append(errs, field.NotSupported(p.Child("kind"), ref.Kind, kinds))
	}
	if ref.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	} else if msgs := pathSegmentName(ref.Name); len(msgs) > 0 {
		errs = append(errs, field.Invalid(p.Child("name"), ref.Name, msgs[0]))
	}
	return errs
}

func subjectErrors(s rbacv1.Subject, namespaced bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	}
	switch s.Kind {
	case rbacv1.ServiceAccountKind:
		if s.Name != "" {
			for _, msg := range validation.IsDNS1123Subdomain(s.Name) {
				errs = append(errs, field.Invalid(p.Child("name"), s.Name, msg))
			}
		}
		if s.APIGroup != "" {
			errs = append(errs, field.NotSupported(p.Child("apiGroup"), s.APIGroup, []string{""}))
		}
		if !namespaced && s.Namespace == "" {
			errs = append(errs, field.Required(p.Child("namespace"), ""))
		}
	case rbacv1.UserKind, rbacv1.GroupKind:
		if s.APIGroup != rbacv1.GroupName {
			errs = append(errs, field.NotSupported(p.Child("apiGroup"), s.APIGroup, []string{rbacv1.GroupName}))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("kind"), s.Kind, []string{rbacv1.ServiceAccountKind, rbacv1.UserKind, rbacv1.GroupKind}))
	}
	return errs
}

// reviewKinds are created without a name: the API server answers them
// and stores nothing.
var reviewKinds = map[string]bool{"TokenReview": true, "SelfSubjectReview": true, "SubjectAccessReview": true,
	"SelfSubjectAccessReview": true, "SelfSubjectRulesReview": true, "LocalSubjectAccessReview": true}

// nameRule is how the API server validates a kind's name: most are DNS
// subdomains; Namespaces are DNS labels, Services DNS-1035 labels, RBAC
// objects path segments.
func nameRule(kind string) apivalidation.ValidateNameFunc {
	switch kind {
	case "CertificateSigningRequest", "ClusterTrustBundle", "IPAddress", "ServiceCIDR",
		"TokenReview", "SelfSubjectReview", "SubjectAccessReview", "SelfSubjectAccessReview", "SelfSubjectRulesReview", "LocalSubjectAccessReview":
		// Names with rules of their own (an IP address, a signer prefix
		// with colons, any name at all) or none (reviews): not checked.
		return func(string, bool) []string { return nil }
	case "Namespace":
		return apivalidation.ValidateNamespaceName
	case "Service":
		return apivalidation.NameIsDNS1035Label
	case "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding":
		return func(name string, prefix bool) []string { return pathSegmentName(name) }
	}
	return apivalidation.NameIsDNSSubdomain
}

// pathSegmentName is the API server's rule for names that end up in a
// URL path segment (RBAC objects).
func pathSegmentName(name string) []string {
	switch {
	case name == "." || name == "..":
		return []string{fmt.Sprintf("may not be '%s'", name)}
	case strings.ContainsAny(name, "/%"):
		return []string{"may not contain '/' or '%'"}
	}
	return nil
}
