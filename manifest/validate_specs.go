package manifest

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

var roleName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,30}$`)

func (r *Recipe) validate(file string) error {
	bad := func(path, format string, args ...any) error {
		return &SpecError{File: file, Path: path, Problem: fmt.Sprintf(format, args...)}
	}
	if r.Name == "" {
		return bad("name", "is required")
	}
	if errs := validation.IsDNS1035Label(r.Name); len(errs) > 0 || len(r.Name) > 47 {
		return bad("name", "%q must be a DNS-1035 label of at most 47 characters (it names the RayJob)", r.Name)
	}
	if r.Entrypoint == "" {
		return bad("entrypoint", "is required")
	}
	if len(r.Fleets) == 0 {
		return bad("fleets", "at least one fleet (e.g. trainer, inference) is required")
	}
	for _, role := range sortedKeys(r.Fleets) {
		f := r.Fleets[role]
		p := "fleets." + role
		if !roleName.MatchString(role) {
			return bad(p, "fleet names are lowercase letters, digits and _ (they name Ray resources and worker groups)")
		}
		if f.Replicas < 1 {
			return bad(p+".replicas", "must be at least 1")
		}
		if f.GPUsPerNode < 0 {
			return bad(p+".gpusPerNode", "must not be negative")
		}
		if m := f.MinReplicas; m != nil && (*m < 0 || *m > f.Replicas) {
			return bad(p+".minReplicas", "%d: must be from 0 to replicas (%d)", *m, f.Replicas)
		}
		if m := f.MaxReplicas; m != nil && *m < f.Replicas {
			return bad(p+".maxReplicas", "%d: must be at least replicas (%d)", *m, f.Replicas)
		}
		if err := quantity(f.CPU); err != nil {
			return bad(p+".cpu", "%v", err)
		}
		if err := quantity(f.Memory); err != nil {
			return bad(p+".memory", "%v", err)
		}
	}
	if r.Inference.Backend == "" {
		return bad("inference.backend", "is required (vllm or sglang)")
	}
	return nil
}

func (in *Infra) validate(file string) error {
	bad := func(path, format string, args ...any) error {
		return &SpecError{File: file, Path: path, Problem: fmt.Sprintf(format, args...)}
	}
	if errs := validation.IsDNS1123Label(in.Namespace); len(errs) > 0 {
		return bad("namespace", "%q: %s", in.Namespace, errs[0])
	}
	if !slices.Contains([]string{ModeRayJob, ModeBringup, ModeAttach}, in.Launch.Mode) {
		return bad("launch.mode", "%q: want rayjob, bringup or attach", in.Launch.Mode)
	}
	if in.Launch.Mode != ModeAttach && len(in.Images) == 0 {
		return bad("images", "map each inference backend to its image, e.g. vllm: ghcr.io/org/worker:vllm")
	}
	for backend, image := range in.Images {
		if image == "" {
			return bad("images."+backend, "is empty")
		}
	}
	for i, s := range in.ImagePullSecrets {
		if errs := validation.IsDNS1123Subdomain(s); len(errs) > 0 {
			return bad(fmt.Sprintf("imagePullSecrets[%d]", i), "%q: %s", s, errs[0])
		}
	}
	if t := in.Launch.TTLSecondsAfterFinished; t != nil && *t < 0 {
		return bad("launch.ttlSecondsAfterFinished", "must not be negative")
	}
	if b := in.Launch.BackoffLimit; b != nil && *b < 0 {
		return bad("launch.backoffLimit", "must not be negative")
	}
	if d := in.Launch.ActiveDeadlineSeconds; d != nil && *d < 1 {
		return bad("launch.activeDeadlineSeconds", "must be at least 1 (leave it out for no deadline)")
	}
	for i, ns := range in.KubeRay.HeadNetworkPolicy.ClientNamespaces {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return bad(fmt.Sprintf("kuberay.headNetworkPolicy.clientNamespaces[%d]", i), "%q: %s", ns, errs[0])
		}
	}
	if d := in.Launch.PreRunningDeadlineSeconds; d != nil && *d < 1 {
		return bad("launch.preRunningDeadlineSeconds", "must be at least 1 (leave it out for no deadline)")
	}
	if s := in.Launch.SubmitterConfig; s != nil && s.BackoffLimit != nil && *s.BackoffLimit < 0 {
		return bad("launch.submitterConfig.backoffLimit", "must not be negative")
	}
	if l := in.Launch; l.Mode != ModeRayJob && (l.BackoffLimit != nil || l.ActiveDeadlineSeconds != nil || l.PreRunningDeadlineSeconds != nil || l.SubmitterConfig != nil || l.SubmissionMode != "") {
		return bad("launch.mode", "backoffLimit, activeDeadlineSeconds, preRunningDeadlineSeconds, submitterConfig and submissionMode are a RayJob's: launch.mode is %q, not rayjob", l.Mode)
	}
	switch in.Launch.SubmissionMode {
	case "", string(rayv1.K8sJobMode), string(rayv1.HTTPMode):
	case string(rayv1.SidecarMode):
		if in.Launch.SubmitterConfig != nil {
			return bad("launch.submitterConfig", "configures a submitter Job, which SidecarMode does not make (its submitter is a container of the head pod): leave it out, or use K8sJobMode")
		}
	default:
		return bad("launch.submissionMode", "%q: want K8sJobMode, SidecarMode or HTTPMode", in.Launch.SubmissionMode)
	}
	sb := in.Sandbox
	if sb.Replicas != nil && *sb.Replicas < 0 {
		return bad("sandbox.replicas", "must not be negative")
	}
	if sb.Port < 0 || sb.Port > 65535 {
		return bad("sandbox.port", "%d is not a port", sb.Port)
	}
	res := sb.Resources
	for path, q := range map[string]string{
		"sandbox.resources.cpu": res.CPU, "sandbox.resources.memory": res.Memory, "sandbox.resources.ephemeralStorage": res.EphemeralStorage,
		"sandbox.resources.cpuLimit": res.CPULimit, "sandbox.resources.memoryLimit": res.MemoryLimit, "sandbox.resources.ephemeralStorageLimit": res.EphemeralStorageLimit,
	} {
		if err := quantity(q); err != nil {
			return bad(path, "%v", err)
		}
	}
	if np := sb.NetworkPolicy; len(np.AllowedEgressCIDRs) > 0 {
		switch {
		case np.AllowEgress != nil && *np.AllowEgress:
			return bad("sandbox.networkPolicy.allowedEgressCidrs", "with sandbox.networkPolicy.allowEgress: true every destination is open, so these CIDRs would limit nothing: drop allowEgress (or set it false) to allow egress to them and DNS only, or drop allowedEgressCidrs")
		case np.Enabled != nil && !*np.Enabled:
			return bad("sandbox.networkPolicy.allowedEgressCidrs", "sandbox.networkPolicy.enabled is false, so no policy limits egress to these CIDRs: turn the policy on, or drop allowedEgressCidrs")
		}
	}
	for i, c := range sb.NetworkPolicy.AllowedEgressCIDRs {
		if _, err := netip.ParsePrefix(c); err != nil {
			return bad(fmt.Sprintf("sandbox.networkPolicy.allowedEgressCidrs[%d]", i), "%q is not a CIDR", c)
		}
	}
	for _, pdb := range []struct {
		path string
		p    *PDBSettings
	}{{"sandbox.pdb", &in.Sandbox.PDB}, {"kuberay.pdb", in.KubeRay.PDB}} {
		if pdb.p == nil {
			continue
		}
		if pdb.p.MaxUnavailable < 0 {
			return bad(pdb.path+".maxUnavailable", "must not be negative")
		}
		if m := pdb.p.MinAvailable; m != nil {
			switch {
			case pdb.path != "kuberay.pdb":
				return bad(pdb.path+".minAvailable", "only kuberay.pdb takes minAvailable; the sandbox budget is set by maxUnavailable")
			case *m < 0:
				return bad(pdb.path+".minAvailable", "must not be negative")
			case pdb.p.MaxUnavailable != 0:
				return bad(pdb.path+".minAvailable", "set minAvailable or maxUnavailable, not both")
			}
		}
	}
	if q := in.Infra.ResourceQuota; q != nil {
		for k, v := range q.Hard {
			if err := quantity(v); err != nil {
				return bad("infra.resourceQuota.hard."+k, "%v", err)
			}
		}
	}
	if l := in.Infra.LimitRange; l != nil {
		for name, m := range map[string]map[string]string{"default": l.Default, "defaultRequest": l.DefaultRequest, "max": l.Max} {
			for k, v := range m {
				if err := quantity(v); err != nil {
					return bad("infra.limitRange."+name+"."+k, "%v", err)
				}
			}
		}
	}
	if pc := in.Infra.PriorityClassName; pc != "" {
		if errs := validation.IsDNS1123Subdomain(pc); len(errs) > 0 {
			return bad("infra.priorityClassName", "%q: %s", pc, errs[0])
		}
	}
	return nil
}

func quantity(s string) error {
	if s == "" {
		return nil
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return fmt.Errorf("%q is not a quantity like 2, 500m or 4Gi", s)
	}
	if q.Sign() < 0 {
		return fmt.Errorf("%q is negative", s)
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
