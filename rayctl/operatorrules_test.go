package rayctl

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	rayutils "github.com/ray-project/kuberay/ray-operator/controllers/ray/utils"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The rules in operatorrules.go must say exactly what the operator's own
// validation says (KubeRay is imported here, in a test, and nowhere in the
// server). Every mutation below is applied alone and in every pair, to a
// RayCluster, to the cluster inside a RayJob and inside a RayService; the
// two implementations must agree on accept or reject and on the message.

type clusterMutation struct {
	name  string
	apply func(spec *rayv1.RayClusterSpec, annotations map[string]string)
}

func worker(spec *rayv1.RayClusterSpec) *rayv1.WorkerGroupSpec { return &spec.WorkerGroupSpecs[0] }

func headEnv(spec *rayv1.RayClusterSpec, name, value string) {
	if len(spec.HeadGroupSpec.Template.Spec.Containers) == 0 {
		return // a mutation removed the head container
	}
	c := &spec.HeadGroupSpec.Template.Spec.Containers[0]
	c.Env = append(c.Env, corev1.EnvVar{Name: name, Value: value})
}

var clusterMutations = []clusterMutation{
	{"no head container", func(s *rayv1.RayClusterSpec, _ map[string]string) { s.HeadGroupSpec.Template.Spec.Containers = nil }},
	{"no worker container", func(s *rayv1.RayClusterSpec, _ map[string]string) {
		worker(s).Template.Spec.Containers = nil
	}},
	{"head resources twice", func(s *rayv1.RayClusterSpec, _ map[string]string) {
		s.HeadGroupSpec.RayStartParams = map[string]string{"num-cpus": "1"}
		s.HeadGroupSpec.Resources = map[string]string{"CPU": "1"}
	}},
	{"worker resources twice", func(s *rayv1.RayClusterSpec, _ map[string]string) {
		worker(s).RayStartParams = map[string]string{"resources": `{"a":1}`}
		worker(s).Resources = map[string]string{"a": "1"}
	}},
	{"worker resources field", func(s *rayv1.RayClusterSpec, _ map[string]string) {
		worker(s).Resources = map[string]string{"GPU": "1"}
	}},
	{"labels in start params", func(s *rayv1.RayClusterSpec, _ map[string]string) {
		worker(s).RayStartParams = map[string]string{"labels": "a=b"}
	}},
	{"bad label key", func(s *rayv1.RayClusterSpec, _ map[string]string) {
		s.HeadGroupSpec.Labels = map[string]string{"bad key!": "v"}
	}},
	{"bad label value", func(s *rayv1.RayClusterSpec, _ map[string]string) { worker(s).Labels = map[string]string{"k": "-bad-"} }},
	{"good labels", func(s *rayv1.RayClusterSpec, _ map[string]string) {
		worker(s).Labels = map[string]string{"ray.io/zone": "a"}
	}},
	{"no minReplicas", func(s *rayv1.RayClusterSpec, _ map[string]string) { worker(s).MinReplicas = nil }},
	{"negative minReplicas", func(s *rayv1.RayClusterSpec, _ map[string]string) { worker(s).MinReplicas = ptr.To[int32](-1) }},
	{"negative maxReplicas", func(s *rayv1.RayClusterSpec, _ map[string]string) { worker(s).MaxReplicas = ptr.To[int32](-2) }},
	{"min above max", func(s *rayv1.RayClusterSpec, _ map[string]string) { worker(s).MinReplicas = ptr.To[int32](9) }},
	{"autoscaling", func(s *rayv1.RayClusterSpec, _ map[string]string) { s.EnableInTreeAutoscaling = ptr.To(true) }},
	{"autoscaler v2", func(s *rayv1.RayClusterSpec, _ map[string]string) {
		s.AutoscalerOptions = &rayv1.AutoscalerOptions{Version: ptr.To(rayv1.AutoscalerVersionV2)}
	}},
	{"autoscaler idle timeout negative", func(s *rayv1.RayClusterSpec, _ map[string]string) {
		if s.AutoscalerOptions == nil {
			s.AutoscalerOptions = &rayv1.AutoscalerOptions{}
		}
		s.AutoscalerOptions.IdleTimeoutSeconds = ptr.To[int32](-5)
	}},
	{"v2 env true", func(s *rayv1.RayClusterSpec, _ map[string]string) { headEnv(s, "RAY_enable_autoscaler_v2", "true") }},
	{"v2 env 0", func(s *rayv1.RayClusterSpec, _ map[string]string) { headEnv(s, "RAY_enable_autoscaler_v2", "0") }},
	{"worker idle timeout", func(s *rayv1.RayClusterSpec, _ map[string]string) { worker(s).IdleTimeoutSeconds = ptr.To[int32](30) }},
	{"worker idle timeout negative", func(s *rayv1.RayClusterSpec, _ map[string]string) { worker(s).IdleTimeoutSeconds = ptr.To[int32](-1) }},
	{"worker suspended", func(s *rayv1.RayClusterSpec, _ map[string]string) { worker(s).Suspend = ptr.To(true) }},
	{"head restart Always", func(s *rayv1.RayClusterSpec, _ map[string]string) {
		s.HeadGroupSpec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
	}},
	{"worker restart OnFailure", func(s *rayv1.RayClusterSpec, _ map[string]string) {
		worker(s).Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	}},
	{"ft annotation", func(_ *rayv1.RayClusterSpec, a map[string]string) { a["ray.io/ft-enabled"] = "True" }},
	{"ft options", func(s *rayv1.RayClusterSpec, _ map[string]string) {
		s.GcsFaultToleranceOptions = &rayv1.GcsFaultToleranceOptions{RedisAddress: "redis:6379"}
	}},
	{"redis address env", func(s *rayv1.RayClusterSpec, _ map[string]string) { headEnv(s, "RAY_REDIS_ADDRESS", "redis:6379") }},
	{"redis password env", func(s *rayv1.RayClusterSpec, _ map[string]string) { headEnv(s, "REDIS_PASSWORD", "x") }},
	{"redis password param", func(s *rayv1.RayClusterSpec, _ map[string]string) {
		s.HeadGroupSpec.RayStartParams = map[string]string{"redis-password": "x"}
	}},
	{"redis username env", func(s *rayv1.RayClusterSpec, _ map[string]string) { headEnv(s, "REDIS_USERNAME", "u") }},
	{"external storage annotation", func(_ *rayv1.RayClusterSpec, a map[string]string) {
		a["ray.io/external-storage-namespace"] = "ns"
	}},
	{"token auth", func(s *rayv1.RayClusterSpec, _ map[string]string) {
		s.AuthOptions = &rayv1.AuthOptions{Mode: rayv1.AuthModeToken}
	}},
	{"old ray version", func(s *rayv1.RayClusterSpec, _ map[string]string) { s.RayVersion = "2.46.0" }},
	{"no ray version", func(s *rayv1.RayClusterSpec, _ map[string]string) { s.RayVersion = "" }},
	{"bad ray version", func(s *rayv1.RayClusterSpec, _ map[string]string) { s.RayVersion = "latest" }},
	{"k8s token auth", func(s *rayv1.RayClusterSpec, _ map[string]string) {
		if s.AuthOptions == nil {
			s.AuthOptions = &rayv1.AuthOptions{}
		}
		s.AuthOptions.EnableK8sTokenAuth = ptr.To(true)
	}},
	{"auth secret", func(s *rayv1.RayClusterSpec, _ map[string]string) {
		if s.AuthOptions == nil {
			s.AuthOptions = &rayv1.AuthOptions{}
		}
		s.AuthOptions.SecretName = ptr.To("s")
	}},
	{"ray 2.55", func(s *rayv1.RayClusterSpec, _ map[string]string) { s.RayVersion = "2.55.1" }},
	{"autoscaling with v2", func(s *rayv1.RayClusterSpec, _ map[string]string) {
		s.EnableInTreeAutoscaling = ptr.To(true)
		s.AutoscalerOptions = &rayv1.AutoscalerOptions{Version: ptr.To(rayv1.AutoscalerVersionV2)}
	}},
	{"k8s token auth on 2.55", func(s *rayv1.RayClusterSpec, _ map[string]string) {
		s.RayVersion = "2.55.0"
		s.AuthOptions = &rayv1.AuthOptions{Mode: rayv1.AuthModeToken, EnableK8sTokenAuth: ptr.To(true)}
	}},
	{"k8s token auth on 2.55 with a secret", func(s *rayv1.RayClusterSpec, _ map[string]string) {
		s.RayVersion = "2.55.0"
		s.AuthOptions = &rayv1.AuthOptions{Mode: rayv1.AuthModeToken, EnableK8sTokenAuth: ptr.To(true), SecretName: ptr.To("s")}
	}},
	{"named head service", func(s *rayv1.RayClusterSpec, _ map[string]string) {
		s.HeadGroupSpec.HeadService = &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "x"}}
	}},
}

func baseClusterSpec() rayv1.RayClusterSpec {
	container := corev1.Container{Name: "ray", Image: "rayproject/ray:2.54.0"}
	return rayv1.RayClusterSpec{
		RayVersion:    "2.54.0",
		HeadGroupSpec: rayv1.HeadGroupSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{container}}}},
		WorkerGroupSpecs: []rayv1.WorkerGroupSpec{{
			GroupName: "gpu", MinReplicas: ptr.To[int32](0), MaxReplicas: ptr.To[int32](4),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{container}}},
		}},
	}
}

// sameVerdict fails unless both errors are nil or both carry the same
// lines (errors.Join's lines may come in another order from the operator,
// which ranges over maps).
func sameVerdict(t *testing.T, what string, ours, operators error) {
	t.Helper()
	lines := func(err error) []string {
		if err == nil {
			return nil
		}
		l := strings.Split(err.Error(), "\n")
		slices.Sort(l)
		return l
	}
	if (ours == nil) != (operators == nil) || !slices.Equal(lines(ours), lines(operators)) {
		t.Errorf("%s:\n ours:     %v\n operator: %v", what, ours, operators)
	}
}

func TestOperatorRulesAgreeWithKubeRay(t *testing.T) {
	var cases [][]clusterMutation
	cases = append(cases, nil)
	for i := range clusterMutations {
		cases = append(cases, []clusterMutation{clusterMutations[i]})
		for j := i + 1; j < len(clusterMutations); j++ {
			cases = append(cases, []clusterMutation{clusterMutations[i], clusterMutations[j]})
		}
	}
	rejected := 0
	for _, muts := range cases {
		var names []string
		spec, annotations := baseClusterSpec(), map[string]string{}
		for _, m := range muts {
			names = append(names, m.name)
			m.apply(&spec, annotations)
		}
		what := "base"
		if len(names) > 0 {
			what = strings.Join(names, " + ")
		}
		theirs := rayutils.ValidateRayClusterSpec(&spec, annotations)
		sameVerdict(t, "RayCluster "+what, operatorClusterSpec(&spec, annotations), theirs)
		if theirs != nil {
			rejected++
		}

		svc := &rayv1.RayService{ObjectMeta: metav1.ObjectMeta{Name: "s", Annotations: annotations}, Spec: rayv1.RayServiceSpec{RayClusterSpec: *spec.DeepCopy()}}
		sameVerdict(t, "RayService "+what, operatorServiceSpec(svc), rayutils.ValidateRayServiceSpec(svc))

		for _, job := range jobVariants(spec, annotations) {
			sameVerdict(t, "RayJob "+what+" "+job.Name, operatorJobSpec(job), rayutils.ValidateRayJobSpec(job))
		}
	}
	// The table must exercise both verdicts, or agreement proves nothing.
	if rejected == 0 || rejected == len(cases) {
		t.Fatalf("%d of %d cluster specs rejected: the mutations do not cover both verdicts", rejected, len(cases))
	}
	t.Logf("%d cluster specs, %d rejected by the operator's rules", len(cases), rejected)
}

// jobVariants wraps a cluster spec in RayJobs that reach every branch of
// the RayJob rules: submission modes, selectors, deadlines, the legacy
// deletion policies and deletion rules.
func jobVariants(spec rayv1.RayClusterSpec, annotations map[string]string) []*rayv1.RayJob {
	base := func(name string) *rayv1.RayJob {
		return &rayv1.RayJob{
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
			Spec:       rayv1.RayJobSpec{Entrypoint: "python x.py", RayClusterSpec: spec.DeepCopy(), ShutdownAfterJobFinishes: true},
		}
	}
	status := func(s rayv1.JobStatus) *rayv1.JobStatus { return &s }
	deployment := func(s rayv1.JobDeploymentStatus) *rayv1.JobDeploymentStatus { return &s }
	rule := func(p rayv1.DeletionPolicyType, ttl int32, js *rayv1.JobStatus, ds *rayv1.JobDeploymentStatus) rayv1.DeletionRule {
		return rayv1.DeletionRule{Policy: p, Condition: rayv1.DeletionCondition{JobStatus: js, JobDeploymentStatus: ds, TTLSeconds: ttl}}
	}
	policy := func(p rayv1.DeletionPolicyType) *rayv1.DeletionPolicy { return &rayv1.DeletionPolicy{Policy: &p} }
	var jobs []*rayv1.RayJob
	add := func(name string, change func(j *rayv1.RayJob)) {
		j := base(name)
		change(j)
		jobs = append(jobs, j)
	}
	add("plain", func(*rayv1.RayJob) {})
	add("suspended", func(j *rayv1.RayJob) { j.Spec.Suspend = true })
	add("suspended-kept", func(j *rayv1.RayJob) { j.Spec.Suspend, j.Spec.ShutdownAfterJobFinishes = true, false })
	add("ttl-negative", func(j *rayv1.RayJob) { j.Spec.TTLSecondsAfterFinished = -1 })
	add("ttl-kept", func(j *rayv1.RayJob) { j.Spec.TTLSecondsAfterFinished, j.Spec.ShutdownAfterJobFinishes = 5, false })
	add("selector", func(j *rayv1.RayJob) {
		j.Spec.RayClusterSpec, j.Spec.ClusterSelector = nil, map[string]string{"ray.io/cluster": "c"}
	})
	add("selector-empty", func(j *rayv1.RayJob) { j.Spec.ClusterSelector = map[string]string{"other": "c"} })
	add("selector-sidecar", func(j *rayv1.RayJob) {
		j.Spec.ClusterSelector, j.Spec.SubmissionMode = map[string]string{"ray.io/cluster": "c"}, rayv1.SidecarMode
	})
	add("selector-backoff", func(j *rayv1.RayJob) {
		j.Spec.ClusterSelector, j.Spec.BackoffLimit = map[string]string{"ray.io/cluster": "c"}, ptr.To[int32](2)
	})
	add("no-cluster", func(j *rayv1.RayJob) { j.Spec.RayClusterSpec = nil })
	add("selector-suspended", func(j *rayv1.RayJob) {
		j.Spec.RayClusterSpec, j.Spec.Suspend, j.Spec.ClusterSelector = nil, true, map[string]string{"ray.io/cluster": "c"}
	})
	add("interactive-backoff", func(j *rayv1.RayJob) {
		j.Spec.SubmissionMode, j.Spec.BackoffLimit = rayv1.InteractiveMode, ptr.To[int32](1)
	})
	add("sidecar", func(j *rayv1.RayJob) { j.Spec.SubmissionMode = rayv1.SidecarMode })
	add("sidecar-template", func(j *rayv1.RayJob) {
		j.Spec.SubmissionMode, j.Spec.SubmitterPodTemplate = rayv1.SidecarMode, &corev1.PodTemplateSpec{}
	})
	add("sidecar-config", func(j *rayv1.RayJob) {
		j.Spec.SubmissionMode, j.Spec.SubmitterConfig = rayv1.SidecarMode, &rayv1.SubmitterConfig{}
	})
	add("sidecar-restart", func(j *rayv1.RayJob) {
		j.Spec.SubmissionMode = rayv1.SidecarMode
		j.Spec.RayClusterSpec.HeadGroupSpec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
	})
	add("runtime-env-bad", func(j *rayv1.RayJob) { j.Spec.RuntimeEnvYAML = "pip: [unclosed" })
	add("runtime-env-good", func(j *rayv1.RayJob) { j.Spec.RuntimeEnvYAML = "pip: [numpy]\nenv_vars: {A: b}" })
	add("deadline-zero", func(j *rayv1.RayJob) { j.Spec.ActiveDeadlineSeconds = ptr.To[int32](0) })
	add("prerunning-negative", func(j *rayv1.RayJob) { j.Spec.PreRunningDeadlineSeconds = ptr.To[int32](-3) })
	add("backoff-negative", func(j *rayv1.RayJob) { j.Spec.BackoffLimit = ptr.To[int32](-1) })
	add("strategy-empty", func(j *rayv1.RayJob) { j.Spec.DeletionStrategy = &rayv1.DeletionStrategy{} })
	add("legacy-half", func(j *rayv1.RayJob) {
		j.Spec.DeletionStrategy = &rayv1.DeletionStrategy{OnSuccess: policy(rayv1.DeleteCluster)}
	})
	add("legacy-unset", func(j *rayv1.RayJob) {
		j.Spec.DeletionStrategy = &rayv1.DeletionStrategy{OnSuccess: &rayv1.DeletionPolicy{}, OnFailure: policy(rayv1.DeleteCluster)}
	})
	add("legacy-failure-unset", func(j *rayv1.RayJob) {
		j.Spec.DeletionStrategy = &rayv1.DeletionStrategy{OnSuccess: policy(rayv1.DeleteCluster), OnFailure: &rayv1.DeletionPolicy{}}
	})
	add("legacy-selector-cluster-on-success", func(j *rayv1.RayJob) {
		j.Spec.ClusterSelector = map[string]string{"ray.io/cluster": "c"}
		j.Spec.DeletionStrategy = &rayv1.DeletionStrategy{OnSuccess: policy(rayv1.DeleteCluster), OnFailure: policy(rayv1.DeleteSelf)}
	})
	add("legacy-workers", func(j *rayv1.RayJob) {
		j.Spec.DeletionStrategy = &rayv1.DeletionStrategy{OnSuccess: policy(rayv1.DeleteWorkers), OnFailure: policy(rayv1.DeleteCluster)}
	})
	add("legacy-none-shutdown", func(j *rayv1.RayJob) {
		j.Spec.DeletionStrategy = &rayv1.DeletionStrategy{OnSuccess: policy(rayv1.DeleteNone), OnFailure: policy(rayv1.DeleteSelf)}
	})
	add("legacy-selector", func(j *rayv1.RayJob) {
		j.Spec.ClusterSelector = map[string]string{"ray.io/cluster": "c"}
		j.Spec.DeletionStrategy = &rayv1.DeletionStrategy{OnSuccess: policy(rayv1.DeleteSelf), OnFailure: policy(rayv1.DeleteWorkers)}
	})
	add("rules-with-shutdown", func(j *rayv1.RayJob) {
		j.Spec.DeletionStrategy = &rayv1.DeletionStrategy{DeletionRules: []rayv1.DeletionRule{rule(rayv1.DeleteSelf, 1, status(rayv1.JobStatusSucceeded), nil)}}
	})
	add("rules-and-legacy", func(j *rayv1.RayJob) {
		j.Spec.ShutdownAfterJobFinishes = false
		j.Spec.DeletionStrategy = &rayv1.DeletionStrategy{OnSuccess: policy(rayv1.DeleteSelf), DeletionRules: []rayv1.DeletionRule{rule(rayv1.DeleteSelf, 1, status(rayv1.JobStatusSucceeded), nil)}}
	})
	add("rules", func(j *rayv1.RayJob) {
		j.Spec.ShutdownAfterJobFinishes = false
		j.Spec.DeletionStrategy = &rayv1.DeletionStrategy{DeletionRules: []rayv1.DeletionRule{
			rule(rayv1.DeleteWorkers, 10, status(rayv1.JobStatusSucceeded), nil),
			rule(rayv1.DeleteCluster, 10, status(rayv1.JobStatusSucceeded), nil),
			rule(rayv1.DeleteSelf, 30, nil, deployment(rayv1.JobDeploymentStatusFailed)),
		}}
	})
	add("rules-broken", func(j *rayv1.RayJob) {
		j.Spec.ShutdownAfterJobFinishes = false
		j.Spec.DeletionStrategy = &rayv1.DeletionStrategy{DeletionRules: []rayv1.DeletionRule{
			rule(rayv1.DeleteCluster, 20, status(rayv1.JobStatusSucceeded), nil),
			rule(rayv1.DeleteWorkers, 30, status(rayv1.JobStatusSucceeded), nil),
			rule(rayv1.DeleteSelf, 5, status(rayv1.JobStatusSucceeded), nil),
			rule(rayv1.DeleteSelf, 5, status(rayv1.JobStatusSucceeded), nil),
			rule(rayv1.DeleteCluster, 9, nil, deployment(rayv1.JobDeploymentStatusFailed)),
			rule(rayv1.DeleteSelf, 1, nil, deployment(rayv1.JobDeploymentStatusFailed)),
			rule(rayv1.DeleteSelf, 1, status(rayv1.JobStatusFailed), deployment(rayv1.JobDeploymentStatusFailed)),
			rule(rayv1.DeleteSelf, 1, nil, nil),
			rule(rayv1.DeleteSelf, -1, status(rayv1.JobStatusStopped), nil),
		}}
	})
	add("rules-selector", func(j *rayv1.RayJob) {
		j.Spec.ShutdownAfterJobFinishes = false
		j.Spec.ClusterSelector = map[string]string{"ray.io/cluster": "c"}
		j.Spec.DeletionStrategy = &rayv1.DeletionStrategy{DeletionRules: []rayv1.DeletionRule{rule(rayv1.DeleteCluster, 1, status(rayv1.JobStatusFailed), nil)}}
	})
	return jobs
}

// TestOperatorMetadataRulesAgreeWithKubeRay covers the name and
// annotation rules of the three kinds.
func TestOperatorMetadataRulesAgreeWithKubeRay(t *testing.T) {
	names := []string{"ok", "a", "", "Upper", "9starts-with-digit", "has.dot", "ends-", strings.Repeat("a", 47), strings.Repeat("a", 48), strings.Repeat("a", 53), strings.Repeat("a", 54)}
	timeouts := []string{"", "5m", "0s", "-1m", "30", "0", "-4", "soon"}
	for _, name := range names {
		meta := metav1.ObjectMeta{Name: name}
		sameVerdict(t, fmt.Sprintf("RayCluster %q", name), operatorClusterMetadata(meta), rayutils.ValidateRayClusterMetadata(meta))
		sameVerdict(t, fmt.Sprintf("RayJob %q", name), operatorJobMetadata(meta), rayutils.ValidateRayJobMetadata(meta))
		for _, timeout := range timeouts {
			meta.Annotations = map[string]string{"ray.io/initializing-timeout": timeout}
			sameVerdict(t, fmt.Sprintf("RayService %q timeout %q", name, timeout), operatorServiceMetadata(meta), rayutils.ValidateRayServiceMetadata(meta))
		}
	}
}

// TestOperatorServiceUpgradeRulesAgreeWithKubeRay covers the RayService's
// own fields.
func TestOperatorServiceUpgradeRulesAgreeWithKubeRay(t *testing.T) {
	types := []*rayv1.RayServiceUpgradeType{nil, ptr.To(rayv1.RayServiceNewCluster), ptr.To(rayv1.RayServiceUpgradeNone), ptr.To(rayv1.RayServiceNewClusterWithIncrementalUpgrade), ptr.To(rayv1.RayServiceUpgradeType("Rolling"))}
	for _, typ := range types {
		for _, delay := range []*int32{nil, ptr.To[int32](0), ptr.To[int32](-1)} {
			svc := &rayv1.RayService{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Spec: rayv1.RayServiceSpec{RayClusterSpec: baseClusterSpec(), RayClusterDeletionDelaySeconds: delay}}
			if typ != nil {
				svc.Spec.UpgradeStrategy = &rayv1.RayServiceUpgradeStrategy{Type: typ}
			}
			sameVerdict(t, fmt.Sprintf("RayService upgrade %v delay %v", ptr.Deref(typ, ""), ptr.Deref(delay, 99)), operatorServiceSpec(svc), rayutils.ValidateRayServiceSpec(svc))
		}
	}
}

// TestOperatorClusterUpgradeRulesAgreeWithKubeRay covers a RayCluster's
// own upgradeStrategy, with every kind of creator label.
func TestOperatorClusterUpgradeRulesAgreeWithKubeRay(t *testing.T) {
	types := []*rayv1.RayClusterUpgradeType{nil, ptr.To(rayv1.RayClusterRecreate), ptr.To(rayv1.RayClusterUpgradeNone), ptr.To(rayv1.RayClusterUpgradeType("Rolling")), ptr.To(rayv1.RayClusterUpgradeType(""))}
	for _, typ := range types {
		for _, creator := range []string{"", "RayCluster", "RayJob", "RayService", "RayCronJob", "other"} {
			rc := &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: baseClusterSpec()}
			if creator != "" {
				rc.Labels = map[string]string{"ray.io/originated-from-crd": creator}
			}
			rc.Spec.UpgradeStrategy = &rayv1.RayClusterUpgradeStrategy{Type: typ}
			sameVerdict(t, fmt.Sprintf("RayCluster upgrade %v created by %q", ptr.Deref(typ, "nil"), creator), operatorClusterUpgrade(rc), rayutils.ValidateRayClusterUpgradeOptions(rc))
		}
	}
}

// TestOperatorCronJobRulesAgreeWithKubeRay covers a RayCronJob's schedule
// and its RayJob template (every variant of the RayJob table).
func TestOperatorCronJobRulesAgreeWithKubeRay(t *testing.T) {
	schedules := []string{"*/5 * * * *", "0 0 * * *", "@hourly", "CRON_TZ=UTC 0 * * * *", "", "soon", "61 * * * *", "* * * * * *"}
	jobs := jobVariants(baseClusterSpec(), nil)
	for i, schedule := range schedules {
		for j, job := range jobs {
			if i > 1 && j > 0 { // a bad schedule is refused before the template is read
				break
			}
			c := &rayv1.RayCronJob{ObjectMeta: metav1.ObjectMeta{Name: "cron"}, Spec: rayv1.RayCronJobSpec{Schedule: schedule, JobTemplate: job.Spec}}
			sameVerdict(t, fmt.Sprintf("RayCronJob %q template %s", schedule, job.Name), operatorCronJobSpec(c), rayutils.ValidateRayCronJobSpec(c))
		}
	}
}

// TestOperatorRefusalsAreTheOperatorsChecks: OperatorRefusals gives, per
// part of each kind, what the operator's own function for that part says.
func TestOperatorRefusalsAreTheOperatorsChecks(t *testing.T) {
	bad := baseClusterSpec()
	bad.HeadGroupSpec.Template.Spec.Containers = nil
	long := metav1.ObjectMeta{Name: strings.Repeat("a", 60)}
	rc := &rayv1.RayCluster{ObjectMeta: long, Spec: bad}
	rc.Spec.UpgradeStrategy = &rayv1.RayClusterUpgradeStrategy{Type: ptr.To(rayv1.RayClusterUpgradeType("Rolling"))}
	job := &rayv1.RayJob{ObjectMeta: long, Spec: rayv1.RayJobSpec{Entrypoint: "x", RayClusterSpec: bad.DeepCopy()}}
	svc := &rayv1.RayService{ObjectMeta: long, Spec: rayv1.RayServiceSpec{RayClusterSpec: *bad.DeepCopy()}}
	cronJob := &rayv1.RayCronJob{Spec: rayv1.RayCronJobSpec{Schedule: "soon"}}
	for _, c := range []struct {
		obj  any
		want []OperatorRefusal
	}{
		{rc, []OperatorRefusal{
			{"metadata.name", rayutils.ValidateRayClusterMetadata(rc.ObjectMeta).Error()},
			{"spec", rayutils.ValidateRayClusterSpec(&rc.Spec, rc.Annotations).Error()},
			{"spec.upgradeStrategy", rayutils.ValidateRayClusterUpgradeOptions(rc).Error()},
		}},
		{job, []OperatorRefusal{
			{"metadata.name", rayutils.ValidateRayJobMetadata(job.ObjectMeta).Error()},
			{"spec", rayutils.ValidateRayJobSpec(job).Error()},
		}},
		{svc, []OperatorRefusal{
			{"metadata", rayutils.ValidateRayServiceMetadata(svc.ObjectMeta).Error()},
			{"spec", rayutils.ValidateRayServiceSpec(svc).Error()},
		}},
		{cronJob, []OperatorRefusal{{"spec", rayutils.ValidateRayCronJobSpec(cronJob).Error()}}},
		{&rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: "ok"}, Spec: baseClusterSpec()}, nil},
		{"not a Ray object", nil},
	} {
		if got := OperatorRefusals(c.obj); !slices.Equal(got, c.want) {
			t.Errorf("%T:\n got  %q\n want %q", c.obj, got, c.want)
		}
	}
}
