package validation

import "slices"

// Rule is one check lint makes: its stable id (what findings, suppressions
// and the config file name), its severity, and one line of help.
type Rule struct {
	ID       string   `json:"id"`
	Severity Severity `json:"severity"`
	Help     string   `json:"help"`
}

// Rules lists every rule, by id. A finding's ID is always one of them
// (a test holds the source to it).
func Rules() []Rule { return slices.Clone(rules) }

// RuleByID returns the rule with the id.
func RuleByID(id string) (Rule, bool) {
	i, ok := slices.BinarySearchFunc(rules, id, func(r Rule, id string) int {
		switch {
		case r.ID < id:
			return -1
		case r.ID > id:
			return 1
		}
		return 0
	})
	if !ok {
		return Rule{}, false
	}
	return rules[i], true
}

// The ids of lint's own findings about suppressions.
const (
	RuleSuppressionWithoutReason = "suppression-without-reason"
	RuleSuppressionUnknownRule   = "suppression-unknown-rule"
)

var rules = func() []Rule {
	r := []Rule{
		// Reading.
		{"parse", SeverityError, "The document is not YAML or JSON, or not a mapping with apiVersion and kind."},
		{"decode", SeverityError, "The object does not decode into its kind's Go type (a field of the wrong type)."},
		{"internal", SeverityError, "Lint failed on this object; report it with the object."},
		{"type", SeverityError, "apiVersion and kind are missing or malformed."},
		{"unknown-kind", SeverityWarning, "No schema is known for this apiVersion and kind (a CRD not installed here): only its metadata is checked."},
		// The API server's checks.
		{"metadata", SeverityError, "metadata is refused by the API server (name, namespace, labels, annotations)."},
		{"schema", SeverityError, "The object breaks its kind's OpenAPI schema or CEL rules, as the API server judges them."},
		{"unknown-field", SeverityError, "A field the kind's schema does not have: the API server drops or refuses it (strict decoding)."},
		{"deprecated-api", SeverityWarning, "The apiVersion is deprecated in the judged Kubernetes release; use the version it names."},
		{"removed-api", SeverityError, "The apiVersion was removed in the judged Kubernetes release; the API server refuses it."},
		{"prerelease-api", SeverityWarning, "An alpha or beta apiVersion: off by default, or gone in a later release."},
		// Pod templates (what the API server checks only when the pod is created).
		{"pod-label", SeverityError, "A pod template's label key or value is not valid."},
		{"pod-containers", SeverityError, "A pod template has no container."},
		{"container-name", SeverityError, "A container name is not a DNS-1123 label, or two containers share it."},
		{"container-image", SeverityError, "A container has no image."},
		{"duplicate-port-name", SeverityWarning, "Two ports of the pod share a name; Services and probes that name it use the first."},
		{"duplicate-env", SeverityWarning, "A container sets an environment variable twice; the last value wins."},
		{"literal-secret", SeverityWarning, "A token, key or password written in an env value or a command-line argument: put it in a Secret (valueFrom.secretKeyRef)."},
		{"env-name", SeverityError, "An environment variable's name is not valid."},
		{"gpu-request-only", SeverityError, "GPUs are requested without a limit: Kubernetes needs the limit, and Ray reads GPUs from limits."},
		{"extended-request-only", SeverityError, "An extended resource is requested without a limit."},
		{"request-above-limit", SeverityError, "A resource request is above its limit."},
		{"extended-request-limit", SeverityError, "An extended resource's request differs from its limit."},
		{"restart-policy", SeverityError, "A pod template's restartPolicy its owner does not allow (a Job: OnFailure or Never; a Deployment: Always)."},
		{"toleration", SeverityError, "A toleration the API server refuses (operator, value or effect)."},
		{"container", SeverityError, "A container field the API server refuses (e.g. imagePullPolicy)."},
		{"container-port", SeverityError, "A container port that is out of range, whose name is too long, or is named twice."},
		{"env-value", SeverityError, "An environment variable with both value and valueFrom."},
		{"pod-spec", SeverityError, "A pod spec field the API server refuses (e.g. dnsPolicy)."},
		{"probe", SeverityError, "A probe the API server refuses (a named port too long, a missing handler)."},
		{"resources", SeverityError, "A resource quantity the API server refuses (negative)."},
		{"volume", SeverityError, "A volume without a name, named twice, or malformed."},
		{"volume-mount", SeverityError, "A volume mount of an undeclared volume, or two mounts at one path."},
		// The KubeRay operator.
		{"kuberay-validation", SeverityError, "The KubeRay operator's own validation refuses the object: it is never reconciled."},
		{"alpha-feature-gate", SeverityWarning, "A field of a later KubeRay release behind an alpha feature gate, off by default (mTLS, the operator's NetworkPolicies, the History Server's collector)."},
		{"annotation-bool", SeverityWarning, "A KubeRay annotation that takes true or false has another value: the operator reads it as false."},
		{"auth-mode-unset", SeverityError, "authOptions is given without a mode."},
		{"autoscaler-options-ignored", SeverityWarning, "autoscalerOptions without enableInTreeAutoscaling: the operator ignores them."},
		{"autoscaler-service-account", SeverityError, "With autoscaling, the head's service account name is rewritten by the operator and the pod is refused."},
		{"autoscaler-version", SeverityWarning, "Autoscaling without an explicit autoscaler version: set autoscalerOptions.version: v2."},
		{"dashboard-port-missing", SeverityError, "The head's Ray container does not expose the dashboard port the job submitter or Serve needs."},
		{"duplicate-group-name", SeverityError, "Two worker groups share a name."},
		{"entrypoint-missing", SeverityError, "A RayJob has no entrypoint."},
		{"entrypoint-resources", SeverityError, "entrypointResources is not a JSON object of resource quantities: the submission is refused."},
		{"exposed-dashboard", SeverityWarning, "The head's Service exposes the Ray dashboard outside the cluster: anyone reaching it runs code."},
		{"fault-tolerance-ignored", SeverityWarning, "An external storage namespace while GCS fault tolerance is off: the operator ignores it."},
		{"fractional-cpu", SeverityWarning, "A fractional CPU on a Ray container: Ray rounds it, and the group schedules fewer tasks than expected."},
		{"gang-scheduling-label", SeverityWarning, "The gang-scheduling label: its presence alone turns gang scheduling on, whatever its value."},
		{"gpu-mismatch", SeverityWarning, "The GPUs a group asks Kubernetes for differ from those it tells Ray (num-gpus)."},
		{"group-name-label", SeverityError, "A worker group's name is not a valid label value (the operator labels its pods with it)."},
		{"group-resource-quantity", SeverityError, "A worker group's resources entry is not a quantity."},
		{"head-service-refused", SeverityError, "The head Service the operator would create is refused by the API server."},
		{"head-service-selects-nothing", SeverityError, "A headService override selects no Ray pod."},
		{"ingress-refused", SeverityError, "The Ingress the operator would create for the dashboard is refused by the API server."},
		{"name-too-long", SeverityError, "The name is too long for the objects the operator derives from it."},
		{"nested-cluster-suspended", SeverityError, "A RayJob's or RayService's cluster spec sets suspend: the operator refuses it."},
		{"nested-upgrade-strategy", SeverityError, "An upgradeStrategy on a RayJob's or RayService's own cluster: the controller refuses it."},
		{"num-of-hosts", SeverityError, "numOfHosts below 1: the group gets no pod (negative: the operator fails at every reconcile)."},
		{"operator-container-name", SeverityError, "A container named as one the operator adds (the autoscaler): two containers of one name, every pod refused."},
		{"operator-env-overrides", SeverityWarning, "An environment variable the operator sets in the Ray container after yours: yours is replaced."},
		{"originated-from-crd-label", SeverityWarning, "A label the operator owns: it is overwritten."},
		{"pdb-ray-pods", SeverityWarning, "A PodDisruptionBudget over Ray pods with a percentage or maxUnavailable: use an integer minAvailable."},
		{"ray-container-first", SeverityWarning, "The Ray container is not the first container: the operator configures the first."},
		{"ray-start-param", SeverityError, "A rayStartParams entry that ray start refuses."},
		{"ray-version-image", SeverityWarning, "rayVersion and the image's Ray version differ."},
		{"raycronjob-feature-gate", SeverityWarning, "RayCronJob needs the operator's feature gate."},
		{"rayjob-field-ignored", SeverityWarning, "rayClusterSpec with clusterSelector: the job runs on an existing cluster and ignores it."},
		{"rayjob-mixed-deletion-policies", SeverityError, "A RayJob mixes the legacy deletion policy with deletion rules."},
		{"rayjob-no-cleanup", SeverityWarning, "A RayJob whose cluster is never deleted: it holds its GPUs after the job."},
		{"rayjob-unbounded", SeverityWarning, "A RayJob that leaves what ends it to defaults: no activeDeadlineSeconds (a hung job runs forever), no preRunningDeadlineSeconds (a cluster that never starts waits forever), no backoffLimit."},
		{"rayjob-ttl-without-shutdown", SeverityError, "ttlSecondsAfterFinished without shutdownAfterJobFinishes."},
		{"redis-address-missing", SeverityError, "GCS fault tolerance without a Redis address."},
		{"redis-credential", SeverityError, "A Redis credential the API server refuses in the head's env: no head, the cluster never starts."},
		{"replicas-out-of-range", SeverityWarning, "replicas outside minReplicas..maxReplicas: the operator clamps it."},
		{"resources-and-start-params", SeverityError, "A group sets a resource both in resources and in rayStartParams."},
		{"selector-matches-no-pod", SeverityWarning, "A Service selector on labels the operator never puts on pods: it selects nothing."},
		{"serve-config", SeverityWarning, "serveConfigV2 that Ray Serve refuses (an error) or that does not do what it says (a warning)."},
		{"serve-port-missing", SeverityError, "The head's Ray container does not expose the Serve port a RayService needs."},
		{"service-field-ignored", SeverityWarning, "A Service override's selector: the operator replaces it with its own."},
		{"submission-mode", SeverityError, "An unknown RayJob submissionMode, or one its other fields do not allow."},
		{"submit-command", SeverityError, "Job metadata the operator passes to ray job submit only for rayVersion 2.6.0 or later."},
		{"submitter-refused", SeverityError, "The submitter Job or pod the operator would create is refused by the API server."},
		{"upgrade-strategy-gate", SeverityWarning, "NewClusterWithIncrementalUpgrade, which the operator reads only with its feature gate on."},
		{"workers-to-delete-foreign", SeverityWarning, "workersToDelete names a pod of another group."},
		{"workers-to-delete-name", SeverityError, "workersToDelete names a pod by a name no pod can have."},
		// Suppressions.
		{RuleSuppressionWithoutReason, SeverityWarning, "A gridweave-lint: ignore= comment without a reason after the rule id."},
		{RuleSuppressionUnknownRule, SeverityWarning, "A suppression (comment or config file) names a rule that does not exist."},
	}
	slices.SortFunc(r, func(a, b Rule) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return r
}()
