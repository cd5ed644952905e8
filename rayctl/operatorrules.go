//lint:file-ignore ST1005 the messages are the KubeRay operator's, word for word (capitals and all)

package rayctl

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/ray-project/kuberay/ray-operator/controllers/ray/utils/dashboardclient"
	"github.com/robfig/cron/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/version"
)

// This file holds the rules the KubeRay v1.6.0 operator checks before it
// reconciles a RayCluster, RayJob, RayService or RayCronJob (its
// controllers/ray/utils/validation.go), with the operator's default
// feature gates: RayJobDeletionPolicy on, RayServiceIncrementalUpgrade
// off. They are written here rather than called from the operator's
// module because that package links the operator's feature-gate package,
// and with it Go's testing package, into every program that imports it.
// The messages are the operator's, word for word, so a user sees the same
// text from us and from `kubectl describe`; operatorrules_test.go runs
// both implementations over the same specs and fails on any difference.

// Limits and keys the operator's rules use (its utils/constant.go).
const (
	maxRayClusterNameLength = 53
	maxRayJobNameLength     = maxRayClusterNameLength - 6
	maxRayServiceNameLength = maxRayClusterNameLength - 6

	ftEnabledAnnotation         = "ray.io/ft-enabled"
	externalStorageNSAnnotation = "ray.io/external-storage-namespace"
	initializingTimeoutAnnot    = "ray.io/initializing-timeout"
	jobClusterSelectorKey       = "ray.io/cluster"

	envRedisAddress      = "RAY_REDIS_ADDRESS"
	envRedisPassword     = "REDIS_PASSWORD"
	envRedisUsername     = "REDIS_USERNAME"
	envAutoscalerV2      = "RAY_enable_autoscaler_v2"
	minTokenAuthVersion  = "2.52.0"
	minK8sTokenAuthRayV  = "2.55.0"
	rayContainerPosition = 0
)

func operatorClusterMetadata(meta metav1.ObjectMeta) error {
	return operatorName(meta.Name, "RayCluster", maxRayClusterNameLength, "")
}

func operatorJobMetadata(meta metav1.ObjectMeta) error {
	return operatorName(meta.Name, "RayJob", maxRayJobNameLength, "The RayJob metadata is invalid: ")
}

func operatorServiceMetadata(meta metav1.ObjectMeta) error {
	if err := operatorName(meta.Name, "RayService", maxRayServiceNameLength, "The RayService metadata is invalid: "); err != nil {
		return err
	}
	if err := initializingTimeout(meta.Annotations); err != nil {
		return fmt.Errorf("The RayService metadata is invalid: RayService annotations is invalid: %w", err)
	}
	return nil
}

// operatorName is the operator's name rule of a kind: at most max
// characters, a DNS-1035 label; prefix leads the message as the
// operator's does for that kind.
func operatorName(name, kind string, max int, prefix string) error {
	if len(name) > max {
		return fmt.Errorf("%s%s name should be no more than %d characters", prefix, kind, max)
	}
	if errs := validation.IsDNS1035Label(name); len(errs) > 0 {
		return fmt.Errorf("%s%s name should be a valid DNS1035 label: %v", prefix, kind, errs)
	}
	return nil
}

// initializingTimeout checks the ray.io/initializing-timeout annotation: a
// positive Go duration or a positive number of seconds.
func initializingTimeout(annotations map[string]string) error {
	value := annotations[initializingTimeoutAnnot]
	if value == "" {
		return nil
	}
	if d, err := time.ParseDuration(value); err == nil {
		if d <= 0 {
			return fmt.Errorf("annotation %s must be a positive duration, got: %s", initializingTimeoutAnnot, value)
		}
		return nil
	}
	if seconds, err := strconv.Atoi(value); err == nil {
		if seconds <= 0 {
			return fmt.Errorf("annotation %s must be a positive integer (seconds), got: %s", initializingTimeoutAnnot, value)
		}
		return nil
	}
	return fmt.Errorf("annotation %s has invalid format: %s. Expected Go duration format (e.g., '5m', '1h') or positive integer seconds", initializingTimeoutAnnot, value)
}

func autoscalingOn(spec *rayv1.RayClusterSpec) bool {
	return spec != nil && spec.EnableInTreeAutoscaling != nil && *spec.EnableInTreeAutoscaling
}

func autoscalerV2On(spec *rayv1.RayClusterSpec) bool {
	return spec != nil && spec.AutoscalerOptions != nil && spec.AutoscalerOptions.Version != nil && *spec.AutoscalerOptions.Version == rayv1.AutoscalerVersionV2
}

func tokenAuthOn(spec *rayv1.RayClusterSpec) bool {
	return spec.AuthOptions != nil && spec.AuthOptions.Mode == rayv1.AuthModeToken
}

func k8sTokenAuthOn(opts *rayv1.AuthOptions) bool {
	return opts != nil && opts.EnableK8sTokenAuth != nil && *opts.EnableK8sTokenAuth
}

func envVar(name string, env []corev1.EnvVar) (corev1.EnvVar, bool) {
	i := slices.IndexFunc(env, func(e corev1.EnvVar) bool { return e.Name == name })
	if i < 0 {
		return corev1.EnvVar{}, false
	}
	return env[i], true
}

func hasEnv(name string, env []corev1.EnvVar) bool {
	_, ok := envVar(name, env)
	return ok
}

// groupResourcesOnce: resources are given either in rayStartParams or in
// the group's resources field, not both.
func groupResourcesOnce(group string, params, resources map[string]string) error {
	inParams := params["num-cpus"] != "" || params["num-gpus"] != "" || params["memory"] != "" || params["resources"] != ""
	if inParams && len(resources) > 0 {
		return fmt.Errorf("resource fields should not be set in both rayStartParams and Resources for %s group; please use only one", group)
	}
	return nil
}

func groupLabels(group string, params, labels map[string]string) error {
	if _, ok := params["labels"]; ok {
		return fmt.Errorf("rayStartParams['labels'] is not supported for %s group; please use the top-level Labels field instead", group)
	}
	var problems []string
	for key, value := range labels {
		for _, e := range validation.IsQualifiedName(key) {
			problems = append(problems, fmt.Sprintf("invalid label key for %s group: '%s', error: %s", group, key, e))
		}
		for _, e := range validation.IsValidLabelValue(value) {
			problems = append(problems, fmt.Sprintf("invalid label value for key '%s' in %s group: '%s', error: %s", key, group, value, e))
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

func workerIdleTimeout(g rayv1.WorkerGroupSpec, spec *rayv1.RayClusterSpec) error {
	if g.IdleTimeoutSeconds == nil {
		return nil
	}
	if *g.IdleTimeoutSeconds < 0 {
		return fmt.Errorf("worker group %s: idleTimeoutSeconds must be non-negative, got %d", g.GroupName, *g.IdleTimeoutSeconds)
	}
	if autoscalerV2On(spec) {
		return nil
	}
	if v, ok := envVar(envAutoscalerV2, spec.HeadGroupSpec.Template.Spec.Containers[rayContainerPosition].Env); ok && (v.Value == "1" || v.Value == "true") {
		return nil
	}
	return fmt.Errorf("worker group %s: idleTimeoutSeconds is set, but autoscaler v2 is not enabled. Please set .spec.autoscalerOptions.version to 'v2' (or set %s environment variable to 'true' in the head pod if using KubeRay < 1.4.0)", g.GroupName, envAutoscalerV2)
}

// OperatorClusterSpecError is what the KubeRay v1.6.0 operator's
// validation says of a cluster spec (a RayCluster's, or the cluster
// inside a RayJob or RayService), word for word, or nil when it admits
// it. annotations are the object's.
func OperatorClusterSpecError(spec *rayv1.RayClusterSpec, annotations map[string]string) error {
	return operatorClusterSpec(spec, annotations)
}

// operatorClusterSpec is the operator's check of a RayCluster spec (also
// the cluster inside a RayJob or RayService).
func operatorClusterSpec(spec *rayv1.RayClusterSpec, annotations map[string]string) error {
	if len(spec.HeadGroupSpec.Template.Spec.Containers) == 0 {
		return errors.New("headGroupSpec should have at least one container")
	}
	if err := groupResourcesOnce("Head", spec.HeadGroupSpec.RayStartParams, spec.HeadGroupSpec.Resources); err != nil {
		return err
	}
	if err := groupLabels("Head", spec.HeadGroupSpec.RayStartParams, spec.HeadGroupSpec.Labels); err != nil {
		return err
	}
	autoscaling := autoscalingOn(spec)
	for _, g := range spec.WorkerGroupSpecs {
		if len(g.Template.Spec.Containers) == 0 {
			return errors.New("workerGroupSpec should have at least one container")
		}
		if !autoscaling && (g.MinReplicas == nil || g.MaxReplicas == nil) {
			return fmt.Errorf("worker group %s must set both minReplicas and maxReplicas when autoscaling is disabled", g.GroupName)
		}
		if g.MinReplicas != nil && *g.MinReplicas < 0 {
			return fmt.Errorf("worker group %s has negative minReplicas %d", g.GroupName, *g.MinReplicas)
		}
		if g.MaxReplicas != nil && *g.MaxReplicas < 0 {
			return fmt.Errorf("worker group %s has negative maxReplicas %d", g.GroupName, *g.MaxReplicas)
		}
		if g.MinReplicas != nil && g.MaxReplicas != nil && *g.MinReplicas > *g.MaxReplicas {
			return fmt.Errorf("worker group %s has minReplicas %d greater than maxReplicas %d", g.GroupName, *g.MinReplicas, *g.MaxReplicas)
		}
		if err := groupResourcesOnce(g.GroupName, g.RayStartParams, g.Resources); err != nil {
			return err
		}
		if err := groupLabels(g.GroupName, g.RayStartParams, g.Labels); err != nil {
			return err
		}
		if err := workerIdleTimeout(g, spec); err != nil {
			return err
		}
	}

	if annotations[ftEnabledAnnotation] != "" && spec.GcsFaultToleranceOptions != nil {
		return fmt.Errorf("%s annotation and GcsFaultToleranceOptions are both set. "+
			"Please use only GcsFaultToleranceOptions to configure GCS fault tolerance", ftEnabledAnnotation)
	}
	head := spec.HeadGroupSpec.Template.Spec.Containers[rayContainerPosition]
	ftOn := strings.ToLower(annotations[ftEnabledAnnotation]) == "true" || spec.GcsFaultToleranceOptions != nil
	if !ftOn && hasEnv(envRedisAddress, head.Env) {
		return fmt.Errorf("%s is set which implicitly enables GCS fault tolerance, "+
			"but GcsFaultToleranceOptions is not set. Please set GcsFaultToleranceOptions "+
			"to enable GCS fault tolerance", envRedisAddress)
	}
	if spec.GcsFaultToleranceOptions != nil {
		switch {
		case spec.HeadGroupSpec.RayStartParams["redis-password"] != "":
			return errors.New("cannot set `redis-password` in rayStartParams when " +
				"GcsFaultToleranceOptions is enabled - use GcsFaultToleranceOptions.RedisPassword instead")
		case hasEnv(envRedisPassword, head.Env):
			return errors.New("cannot set `REDIS_PASSWORD` env var in head Pod when " +
				"GcsFaultToleranceOptions is enabled - use GcsFaultToleranceOptions.RedisPassword instead")
		case hasEnv(envRedisAddress, head.Env):
			return errors.New("cannot set `RAY_REDIS_ADDRESS` env var in head Pod when " +
				"GcsFaultToleranceOptions is enabled - use GcsFaultToleranceOptions.RedisAddress instead")
		case annotations[externalStorageNSAnnotation] != "":
			return errors.New("cannot set `ray.io/external-storage-namespace` annotation when " +
				"GcsFaultToleranceOptions is enabled - use GcsFaultToleranceOptions.ExternalStorageNamespace instead")
		}
	}
	if spec.HeadGroupSpec.RayStartParams["redis-username"] != "" || hasEnv(envRedisUsername, head.Env) {
		return errors.New("cannot set redis username in rayStartParams or environment variables" +
			" - use GcsFaultToleranceOptions.RedisUsername instead")
	}

	if !autoscaling {
		if v, ok := envVar(envAutoscalerV2, head.Env); ok && (v.Value == "1" || v.Value == "true") {
			return fmt.Errorf("environment variable %s cannot be set to '%s' when enableInTreeAutoscaling is false. Please set enableInTreeAutoscaling: true to use autoscaler v2", envAutoscalerV2, v.Value)
		}
	} else {
		for _, g := range spec.WorkerGroupSpecs {
			if g.Suspend != nil && *g.Suspend {
				return fmt.Errorf("worker group %s cannot be suspended with Autoscaler enabled", g.GroupName)
			}
		}
		if spec.AutoscalerOptions != nil && spec.AutoscalerOptions.Version != nil && hasEnv(envAutoscalerV2, head.Env) {
			return fmt.Errorf("both .spec.autoscalerOptions.version and head Pod env var %s are set, please only use the former", envAutoscalerV2)
		}
		if autoscalerV2On(spec) {
			if p := spec.HeadGroupSpec.Template.Spec.RestartPolicy; p != "" && p != corev1.RestartPolicyNever {
				return errors.New("restartPolicy for head Pod should be Never or unset when using autoscaler V2")
			}
			for _, g := range spec.WorkerGroupSpecs {
				if p := g.Template.Spec.RestartPolicy; p != "" && p != corev1.RestartPolicyNever {
					return fmt.Errorf("restartPolicy for worker group %s should be Never or unset when using autoscaler V2", g.GroupName)
				}
			}
		}
	}
	if o := spec.AutoscalerOptions; o != nil && o.IdleTimeoutSeconds != nil && *o.IdleTimeoutSeconds < 0 {
		return fmt.Errorf("autoscalerOptions.idleTimeoutSeconds must be non-negative, got %d", *o.IdleTimeoutSeconds)
	}
	return authOptions(spec)
}

func authOptions(spec *rayv1.RayClusterSpec) error {
	if !tokenAuthOn(spec) {
		if k8sTokenAuthOn(spec.AuthOptions) {
			return errors.New("authOptions.enableK8sTokenAuth is enabled but authOptions.mode not set to 'token'")
		}
		return nil
	}
	if spec.RayVersion == "" {
		return errors.New("authOptions.mode is 'token' but RayVersion was not specified. Ray version 2.52.0 or later is required")
	}
	rayVersion, err := version.ParseGeneric(spec.RayVersion)
	if err != nil {
		return fmt.Errorf("authOptions.mode is 'token' but RayVersion format is invalid: %s, %w", spec.RayVersion, err)
	}
	if rayVersion.LessThan(version.MustParseGeneric(minTokenAuthVersion)) {
		return fmt.Errorf("authOptions.mode is 'token' but minimum Ray version is 2.52.0, got %s", spec.RayVersion)
	}
	if k8sTokenAuthOn(spec.AuthOptions) {
		if rayVersion.LessThan(version.MustParseGeneric(minK8sTokenAuthRayV)) {
			return fmt.Errorf("authOptions.enableK8sTokenAuth is enabled but minimum Ray version is 2.55.0, got %s", spec.RayVersion)
		}
		if name := spec.AuthOptions.SecretName; name != nil && *name != "" {
			return errors.New("authOptions.enableK8sTokenAuth is enabled and authOptions.secretName is also set")
		}
	}
	return nil
}

// operatorJobSpec is the operator's check of a RayJob spec.
func operatorJobSpec(job *rayv1.RayJob) error {
	s := &job.Spec
	if s.Suspend && !s.ShutdownAfterJobFinishes {
		return errors.New("The RayJob spec is invalid: a RayJob with shutdownAfterJobFinishes set to false is not allowed to be suspended")
	}
	if s.TTLSecondsAfterFinished < 0 {
		return errors.New("The RayJob spec is invalid: TTLSecondsAfterFinished must be a non-negative integer")
	}
	if err := deletionConfiguration(job); err != nil {
		return err
	}
	selectorMode := len(s.ClusterSelector) != 0
	if s.Suspend && selectorMode {
		return errors.New("The RayJob spec is invalid: the ClusterSelector mode doesn't support the suspend operation")
	}
	if s.RayClusterSpec == nil && !selectorMode {
		return errors.New("The RayJob spec is invalid: one of RayClusterSpec or ClusterSelector must be set")
	}
	if selectorMode {
		if s.ClusterSelector[jobClusterSelectorKey] == "" {
			return errors.New("cluster name in ClusterSelector should not be empty")
		}
		if s.SubmissionMode == rayv1.SidecarMode {
			return errors.New("ClusterSelector is not supported in SidecarMode")
		}
		if s.BackoffLimit != nil && *s.BackoffLimit > 0 {
			return errors.New("The RayJob spec is invalid: BackoffLimit is incompatible with ClusterSelector mode")
		}
	}
	if s.SubmissionMode == rayv1.InteractiveMode && s.BackoffLimit != nil && *s.BackoffLimit > 0 {
		return errors.New("The RayJob spec is invalid: BackoffLimit is incompatible with InteractiveMode")
	}
	if s.SubmissionMode == rayv1.SidecarMode {
		if s.SubmitterPodTemplate != nil {
			return errors.New("Currently, SidecarMode doesn't support SubmitterPodTemplate")
		}
		if s.SubmitterConfig != nil {
			return errors.New("Currently, SidecarMode doesn't support SubmitterConfig")
		}
		if p := s.RayClusterSpec.HeadGroupSpec.Template.Spec.RestartPolicy; p != "" && p != corev1.RestartPolicyNever {
			return errors.New("restartPolicy for head Pod should be Never or unset when using SidecarMode")
		}
	}
	if s.RayClusterSpec != nil {
		if k8sTokenAuthOn(s.RayClusterSpec.AuthOptions) {
			return errors.New("The RayJob spec is invalid: K8s token auth mode is currently not supported for RayJob")
		}
		if err := operatorClusterSpec(s.RayClusterSpec, job.Annotations); err != nil {
			return fmt.Errorf("The RayJob spec is invalid: %w", err)
		}
	}
	if _, err := dashboardclient.UnmarshalRuntimeEnvYAML(s.RuntimeEnvYAML); err != nil {
		return err
	}
	if s.ActiveDeadlineSeconds != nil && *s.ActiveDeadlineSeconds <= 0 {
		return errors.New("The RayJob spec is invalid: activeDeadlineSeconds must be a positive integer")
	}
	if s.PreRunningDeadlineSeconds != nil && *s.PreRunningDeadlineSeconds <= 0 {
		return errors.New("The RayJob spec is invalid: preRunningDeadlineSeconds must be a positive integer")
	}
	if s.BackoffLimit != nil && *s.BackoffLimit < 0 {
		return errors.New("The RayJob spec is invalid: backoffLimit must be a positive integer")
	}
	return nil
}

func deletionConfiguration(job *rayv1.RayJob) error {
	s := &job.Spec
	if !s.ShutdownAfterJobFinishes && s.TTLSecondsAfterFinished > 0 {
		return errors.New("The RayJob spec is invalid: a RayJob with shutdownAfterJobFinishes set to false cannot have TTLSecondsAfterFinished")
	}
	strategy := s.DeletionStrategy
	if strategy == nil {
		return nil
	}
	legacy := strategy.OnSuccess != nil || strategy.OnFailure != nil
	rules := len(strategy.DeletionRules) > 0
	switch {
	case rules && s.ShutdownAfterJobFinishes:
		return errors.New("The RayJob spec is invalid: spec.shutdownAfterJobFinishes and spec.deletionStrategy.deletionRules are mutually exclusive")
	case rules && legacy:
		return errors.New("The RayJob spec is invalid: Cannot use both legacy onSuccess/onFailure fields and deletionRules simultaneously")
	case legacy:
		return legacyDeletionPolicies(job)
	case rules:
		return deletionRules(job)
	default:
		return errors.New("The RayJob spec is invalid: DeletionStrategy requires either BOTH onSuccess and onFailure, OR the deletionRules field (cannot be empty)")
	}
}

func deletionRules(job *rayv1.RayJob) error {
	selectorMode := len(job.Spec.ClusterSelector) != 0
	// TTLs per condition ("JobStatus" or "JobDeploymentStatus", then its
	// value), per policy, for the uniqueness and ordering checks.
	type condition struct{ kind, value string }
	ttls := map[condition]map[rayv1.DeletionPolicyType]int32{}
	var conditions []condition // in first-seen order, for stable messages
	var errs []error
	for i, rule := range job.Spec.DeletionStrategy.DeletionRules {
		c := rule.Condition
		switch {
		case c.JobStatus != nil && c.JobDeploymentStatus != nil:
			errs = append(errs, fmt.Errorf("deletionRules[%d]: %w", i, errors.New("cannot set both JobStatus and JobDeploymentStatus at the same time")))
			continue
		case c.JobStatus == nil && c.JobDeploymentStatus == nil:
			errs = append(errs, fmt.Errorf("deletionRules[%d]: %w", i, errors.New("exactly one of JobStatus and JobDeploymentStatus must be set")))
			continue
		case c.TTLSeconds < 0:
			errs = append(errs, fmt.Errorf("deletionRules[%d]: %w", i, errors.New("TTLSeconds must be non-negative")))
			continue
		}
		if selectorMode && (rule.Policy == rayv1.DeleteCluster || rule.Policy == rayv1.DeleteWorkers) {
			errs = append(errs, fmt.Errorf("deletionRules[%d]: DeletionPolicyType '%s' not supported when ClusterSelector is set", i, rule.Policy))
			continue
		}
		if autoscalingOn(job.Spec.RayClusterSpec) && rule.Policy == rayv1.DeleteWorkers {
			errs = append(errs, fmt.Errorf("deletionRules[%d]: DeletionPolicyType 'DeleteWorkers' not supported with autoscaling enabled", i))
			continue
		}
		key := condition{"JobDeploymentStatus", ""}
		if c.JobStatus != nil {
			key = condition{"JobStatus", string(*c.JobStatus)}
		} else {
			key.value = string(*c.JobDeploymentStatus)
		}
		if ttls[key] == nil {
			ttls[key] = map[rayv1.DeletionPolicyType]int32{}
			conditions = append(conditions, key)
		}
		if _, dup := ttls[key][rule.Policy]; dup {
			errs = append(errs, fmt.Errorf("deletionRules[%d]: duplicate rule for DeletionPolicyType '%s' and %s '%s'", i, rule.Policy, key.kind, key.value))
			continue
		}
		ttls[key][rule.Policy] = c.TTLSeconds
	}
	// Workers go first, then the cluster, then the RayJob itself: a later
	// step may not have a shorter TTL than an earlier one. The operator
	// reports the JobStatus conditions before the JobDeploymentStatus ones.
	slices.SortStableFunc(conditions, func(a, b condition) int {
		return cmp.Compare(b.kind, a.kind) // "JobStatus" sorts after "JobDeploymentStatus": reversed, it comes first
	})
	for _, key := range conditions {
		var prev rayv1.DeletionPolicyType
		seen := false
		for _, policy := range []rayv1.DeletionPolicyType{rayv1.DeleteWorkers, rayv1.DeleteCluster, rayv1.DeleteSelf} {
			ttl, ok := ttls[key][policy]
			if !ok {
				continue
			}
			if seen && ttl < ttls[key][prev] {
				errs = append(errs, fmt.Errorf("for %s '%s': %s TTL (%d) must be >= %s TTL (%d)", key.kind, key.value, policy, ttl, prev, ttls[key][prev]))
			}
			prev, seen = policy, true
		}
	}
	return errors.Join(errs...)
}

func legacyDeletionPolicies(job *rayv1.RayJob) error {
	strategy := job.Spec.DeletionStrategy
	if strategy.OnSuccess == nil || strategy.OnFailure == nil {
		return errors.New("both DeletionStrategy.OnSuccess and DeletionStrategy.OnFailure must be set when using the legacy deletion policy fields of DeletionStrategy")
	}
	if strategy.OnSuccess.Policy == nil {
		return errors.New("the DeletionPolicyType field of DeletionStrategy.OnSuccess cannot be unset when DeletionStrategy is enabled")
	}
	if strategy.OnFailure.Policy == nil {
		return errors.New("the DeletionPolicyType field of DeletionStrategy.OnFailure cannot be unset when DeletionStrategy is enabled")
	}
	onSuccess, onFailure := *strategy.OnSuccess.Policy, *strategy.OnFailure.Policy
	if len(job.Spec.ClusterSelector) != 0 {
		if onSuccess == rayv1.DeleteCluster || onSuccess == rayv1.DeleteWorkers {
			return fmt.Errorf("the ClusterSelector mode doesn't support DeletionStrategy=%s on success", onSuccess)
		}
		if onFailure == rayv1.DeleteCluster || onFailure == rayv1.DeleteWorkers {
			return fmt.Errorf("the ClusterSelector mode doesn't support DeletionStrategy=%s on failure", onFailure)
		}
	}
	if (onSuccess == rayv1.DeleteWorkers || onFailure == rayv1.DeleteWorkers) && autoscalingOn(job.Spec.RayClusterSpec) {
		return errors.New("DeletionStrategy=DeleteWorkers currently does not support RayCluster with autoscaling enabled")
	}
	if job.Spec.ShutdownAfterJobFinishes && (onSuccess == rayv1.DeleteNone || onFailure == rayv1.DeleteNone) {
		return errors.New("The RayJob spec is invalid: shutdownAfterJobFinshes is set to 'true' while deletion policy is 'DeleteNone'")
	}
	return nil
}

// operatorServiceSpec is the operator's check of a RayService spec. With
// the RayServiceIncrementalUpgrade gate off, as the operator ships, the
// incremental-upgrade options are not checked.
func operatorServiceSpec(svc *rayv1.RayService) error {
	s := &svc.Spec
	if k8sTokenAuthOn(s.RayClusterSpec.AuthOptions) {
		return errors.New("The RayService spec is invalid: K8s token auth mode is currently not supported for RayService")
	}
	if err := operatorClusterSpec(&s.RayClusterSpec, svc.Annotations); err != nil {
		return fmt.Errorf("The RayService spec is invalid: %w", err)
	}
	if h := s.RayClusterSpec.HeadGroupSpec.HeadService; h != nil && h.Name != "" {
		return errors.New("The RayService spec is invalid: spec.rayClusterConfig.headGroupSpec.headService.metadata.name should not be set")
	}
	if u := s.UpgradeStrategy; u != nil && u.Type != nil {
		switch *u.Type {
		case rayv1.RayServiceUpgradeNone, rayv1.RayServiceNewCluster, rayv1.RayServiceNewClusterWithIncrementalUpgrade:
		default:
			return fmt.Errorf("The RayService spec is invalid: Spec.UpgradeStrategy.Type value %s is invalid, valid options are %s, %s, or %s", *u.Type, rayv1.RayServiceNewClusterWithIncrementalUpgrade, rayv1.RayServiceNewCluster, rayv1.RayServiceUpgradeNone)
		}
	}
	if d := s.RayClusterDeletionDelaySeconds; d != nil && *d < 0 {
		return fmt.Errorf("The RayService spec is invalid: Spec.RayClusterDeletionDelaySeconds should be a non-negative integer, got %d", *d)
	}
	return nil
}

// originatedFromLabel names the kind of object that made a RayCluster
// (the operator's RayOriginatedFromCRDLabelKey).
const originatedFromLabel = "ray.io/originated-from-crd"

// operatorClusterUpgrade is the operator's check of a RayCluster's own
// upgradeStrategy (ValidateRayClusterUpgradeOptions).
func operatorClusterUpgrade(rc *rayv1.RayCluster) error {
	s := rc.Spec.UpgradeStrategy
	if s == nil || s.Type == nil {
		return nil
	}
	if *s.Type != rayv1.RayClusterRecreate && *s.Type != rayv1.RayClusterUpgradeNone {
		return fmt.Errorf("The RayCluster spec is invalid: Spec.UpgradeStrategy.Type value %s is invalid, valid options are %s or %s", *s.Type, rayv1.RayClusterRecreate, rayv1.RayClusterUpgradeNone)
	}
	// The operator's CRD type of the label: RayCluster unless it names a
	// RayJob or a RayService.
	if creator := rc.Labels[originatedFromLabel]; creator == "RayJob" || creator == "RayService" {
		return fmt.Errorf("upgradeStrategy cannot be set when RayCluster is created by %s", creator)
	}
	return nil
}

// operatorCronJobSpec is the operator's check of a RayCronJob
// (ValidateRayCronJobSpec): a standard cron schedule and a valid RayJob
// template.
func operatorCronJobSpec(c *rayv1.RayCronJob) error {
	if _, err := cron.ParseStandard(c.Spec.Schedule); err != nil {
		return fmt.Errorf("invalid cron schedule: %w", err)
	}
	if err := operatorJobSpec(&rayv1.RayJob{Spec: c.Spec.JobTemplate}); err != nil {
		return fmt.Errorf("invalid RayJob template: %w", err)
	}
	return nil
}

// An OperatorRefusal is something the KubeRay operator's validation
// refuses in an object before it reconciles it (an event, and no
// reconcile; never an admission error): the part of the object it
// judged and the operator's message, word for word.
type OperatorRefusal struct {
	// Field is the part judged: metadata.name (metadata for a
	// RayService), spec or spec.upgradeStrategy.
	Field   string
	Message string
}

// OperatorRefusals is what the KubeRay v1.6.0 operator's validation says
// of obj, a *rayv1.RayCluster, RayJob, RayService or RayCronJob: every
// refusal, in the operator's order; none when it admits obj (or obj is
// of another kind).
func OperatorRefusals(obj any) []OperatorRefusal {
	var out []OperatorRefusal
	add := func(field string, err error) {
		if err != nil {
			out = append(out, OperatorRefusal{Field: field, Message: err.Error()})
		}
	}
	switch o := obj.(type) {
	case *rayv1.RayCluster:
		add("metadata.name", operatorClusterMetadata(o.ObjectMeta))
		add("spec", operatorClusterSpec(&o.Spec, o.Annotations))
		add("spec.upgradeStrategy", operatorClusterUpgrade(o))
	case *rayv1.RayJob:
		add("metadata.name", operatorJobMetadata(o.ObjectMeta))
		add("spec", operatorJobSpec(o))
	case *rayv1.RayService:
		add("metadata", operatorServiceMetadata(o.ObjectMeta))
		add("spec", operatorServiceSpec(o))
	case *rayv1.RayCronJob:
		add("spec", operatorCronJobSpec(o))
	}
	return out
}
