package manifest

import (
	"os"
	"reflect"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
)

// Recipe says what to run: the entrypoint with its overrides, the runtime
// environment, the GPU fleets and the inference backend.
type Recipe struct {
	Name string `json:"name" schema:"required;dns1035;maxLength=47"`
	// Entrypoint is the training command, e.g. "python -m dockyard_rl.train".
	Entrypoint string `json:"entrypoint" schema:"required;minLength=1"`
	// Overrides are appended to the entrypoint (key=value, Hydra style).
	Overrides  []string          `json:"overrides,omitempty"`
	RuntimeEnv *RuntimeEnv       `json:"runtimeEnv,omitempty"`
	Fleets     map[string]Fleet  `json:"fleets" schema:"required;minProperties=1;propertyNames=^[a-z][a-z0-9_]{0,30}$"`
	Inference  InferenceSettings `json:"inference" schema:"required"`
}

// RuntimeEnv is the Ray runtime environment of the job.
type RuntimeEnv struct {
	EnvVars    map[string]string `json:"env_vars,omitempty"`
	WorkingDir string            `json:"working_dir,omitempty"`
	PyModules  []string          `json:"py_modules,omitempty"`
}

// Fleet is one role's GPU workers: Replicas pods of GPUsPerNode GPUs.
// With MinReplicas or MaxReplicas the fleet autoscales: Ray's autoscaler
// (v2) starts with Replicas and moves between the bounds by the work that
// waits for the fleet.
type Fleet struct {
	Replicas int32 `json:"replicas" schema:"required;minimum=1"`
	// MinReplicas is the fewest pods an autoscaled fleet keeps (0 lets it
	// scale to none); default Replicas.
	MinReplicas *int32 `json:"minReplicas,omitempty" schema:"minimum=0"`
	// MaxReplicas is the most pods an autoscaled fleet grows to; default
	// Replicas.
	MaxReplicas *int32 `json:"maxReplicas,omitempty" schema:"minimum=1"`
	GPUsPerNode int32  `json:"gpusPerNode" schema:"minimum=0"`
	CPU         string `json:"cpu,omitempty" schema:"quantity"`
	Memory      string `json:"memory,omitempty" schema:"quantity"`
	// PriorityClassName overrides infra.priorityClassName for this fleet.
	PriorityClassName string `json:"priorityClassName,omitempty"`
}

// InferenceSettings picks the inference backend (and so the image).
type InferenceSettings struct {
	Backend string `json:"backend" schema:"required;minLength=1"` // vllm or sglang
}

// Infra says where to run: namespace, images, pull secrets, how to launch,
// KubeRay overrides, the sandbox pool and namespace governance.
type Infra struct {
	Namespace string `json:"namespace" schema:"required;dns1123label"`
	// InferenceBackend, if set, overrides the recipe's inference.backend:
	// the infra spec is where the image (and so the backend) is chosen.
	InferenceBackend string `json:"inferenceBackend,omitempty"`
	// Images maps an inference backend to its image (they cannot share one).
	Images           map[string]string `json:"images" schema:"minLength=1"`
	ImagePullSecrets []string          `json:"imagePullSecrets,omitempty" schema:"dns1123subdomain"`
	Launch           Launch            `json:"launch" schema:"required"`
	KubeRay          KubeRaySettings   `json:"kuberay,omitempty"`
	Sandbox          Sandbox           `json:"sandbox,omitempty"`
	Infra            Governance        `json:"infra,omitempty"`
}

// Launch modes.
const (
	ModeRayJob  = "rayjob"  // a RayJob that brings up its own cluster
	ModeBringup = "bringup" // a bare RayCluster; jobs are submitted later
	ModeAttach  = "attach"  // an existing cluster; nothing Ray is rendered
)

// Launch says how the workload starts.
type Launch struct {
	Mode        string `json:"mode" schema:"required;enum=rayjob|bringup|attach"`
	ClusterName string `json:"clusterName,omitempty"` // default the recipe name
	// TTLSecondsAfterFinished for the RayJob; default 600.
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty" schema:"minimum=0"`
	// BackoffLimit is how many times the RayJob is retried (a new cluster
	// each time) after it fails; default 0, none.
	BackoffLimit *int32 `json:"backoffLimit,omitempty" schema:"minimum=0"`
	// ActiveDeadlineSeconds bounds the RayJob's whole run: past it the job
	// is failed and its cluster deleted; default none.
	ActiveDeadlineSeconds *int32 `json:"activeDeadlineSeconds,omitempty" schema:"minimum=1"`
	// PreRunningDeadlineSeconds bounds the wait for the RayJob to run (its
	// cluster's pods Pending for GPUs, say): past it the job is failed;
	// default none.
	PreRunningDeadlineSeconds *int32 `json:"preRunningDeadlineSeconds,omitempty" schema:"minimum=1"`
	// SubmitterConfig is the submitter Job's own retries.
	SubmitterConfig *SubmitterSettings `json:"submitterConfig,omitempty"`
	// SubmissionMode is how KubeRay submits the RayJob's job: K8sJobMode
	// (the default: a submitter Job, whose pod may land on any node),
	// SidecarMode (a submitter container in the head pod, so it runs
	// where the head runs) or HTTPMode (the operator itself, over HTTP to
	// the dashboard).
	SubmissionMode string `json:"submissionMode,omitempty" schema:"enum=K8sJobMode|SidecarMode|HTTPMode"`
}

// SubmitterSettings configure the RayJob's submitter Job.
type SubmitterSettings struct {
	// BackoffLimit is how many times the submitter pod is retried before
	// the job counts as failed; KubeRay's default is 2.
	BackoffLimit *int32 `json:"backoffLimit,omitempty" schema:"minimum=0"`
}

// KubeRaySettings tune the GPU RayCluster.
type KubeRaySettings struct {
	RayVersion string `json:"rayVersion,omitempty"`
	// Spec is merged over the rendered RayClusterSpec as Kubernetes'
	// strategic merge does: mappings merge, null deletes, worker groups
	// merge by groupName and containers, env, volumes and ports by their
	// names (a new name is added), other lists replace. Its keys are
	// checked against RayClusterSpec.
	Spec map[string]any `json:"spec,omitempty"`
	PDB  *PDBSettings   `json:"pdb,omitempty"`
	// HeadNetworkPolicy scopes who reaches the head of a cluster with GPU
	// fleets (on by default there): everything from the launch's own Ray
	// pods, the dashboard, Serve and metrics ports from anywhere (the
	// dashboard asks for the cluster's token: authOptions, on by default
	// with them), the Ray client port (10001) only from the namespaces and
	// pods named. enabled: false leaves the head open.
	HeadNetworkPolicy HeadNetworkPolicySettings `json:"headNetworkPolicy,omitempty"`
	// FleetResourcePrefix names the Ray resource of each fleet
	// (<prefix><role>); default dockyard_fleet_.
	FleetResourcePrefix string `json:"fleetResourcePrefix,omitempty"`
	// FleetRoleEnv is the variable exporting the role; default DOCKYARD_FLEET_ROLE.
	FleetRoleEnv string `json:"fleetRoleEnv,omitempty"`
}

// HeadNetworkPolicySettings configure the GPU cluster head's
// NetworkPolicy.
type HeadNetworkPolicySettings struct {
	// Enabled defaults to true for a cluster with GPU fleets.
	Enabled *bool `json:"enabled,omitempty"`
	// ClientNamespaces may reach the Ray client port (every pod in them).
	ClientNamespaces []string `json:"clientNamespaces,omitempty" schema:"dns1123label"`
	// ClientPodLabels select pods of the launch's namespace that may reach
	// the Ray client port.
	ClientPodLabels map[string]string `json:"clientPodLabels,omitempty"`
}

// PDBSettings configure a PodDisruptionBudget.
type PDBSettings struct {
	Enabled        *bool `json:"enabled,omitempty"`
	MaxUnavailable int32 `json:"maxUnavailable,omitempty" schema:"minimum=0"`
	// MinAvailable (kuberay.pdb only) is how many Ray pods must stay up. A
	// RayCluster has no scale subresource, so the disruption controller
	// can honour only an integer minAvailable over its pods; by default it
	// is the cluster's pod count (head + worker replicas) less
	// maxUnavailable.
	MinAvailable *int32 `json:"minAvailable,omitempty" schema:"minimum=0"`
}

// Sandbox is the GPU-free pool of task executors.
type Sandbox struct {
	Enabled                   *bool                             `json:"enabled,omitempty"`
	Image                     string                            `json:"image,omitempty"`
	Replicas                  *int32                            `json:"replicas,omitempty" schema:"minimum=0"`
	Port                      int32                             `json:"port,omitempty" schema:"minimum=0;maximum=65535"`
	InjectURLs                bool                              `json:"injectUrls,omitempty"`
	Resources                 SandboxResources                  `json:"resources,omitempty"`
	Security                  SandboxSecurity                   `json:"security,omitempty"`
	NetworkPolicy             SandboxNetworkPolicy              `json:"networkPolicy,omitempty"`
	PDB                       PDBSettings                       `json:"pdb,omitempty"`
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`
}

// SandboxResources are requests, and limits that default to them.
type SandboxResources struct {
	CPU                   string `json:"cpu,omitempty" schema:"quantity"`
	Memory                string `json:"memory,omitempty" schema:"quantity"`
	EphemeralStorage      string `json:"ephemeralStorage,omitempty" schema:"quantity"`
	CPULimit              string `json:"cpuLimit,omitempty" schema:"quantity"`
	MemoryLimit           string `json:"memoryLimit,omitempty" schema:"quantity"`
	EphemeralStorageLimit string `json:"ephemeralStorageLimit,omitempty" schema:"quantity"`
}

// SandboxSecurity is the hardening baseline; on unless Enabled is false.
type SandboxSecurity struct {
	Enabled                *bool `json:"enabled,omitempty"`
	RunAsNonRoot           bool  `json:"runAsNonRoot,omitempty"`
	ReadOnlyRootFilesystem bool  `json:"readOnlyRootFilesystem,omitempty"`
}

// SandboxNetworkPolicy restricts the pool's traffic: ingress from the
// namespace's pods to its port; egress is open unless AllowEgress is false
// or AllowedEgressCIDRs are given, then only to those CIDRs and DNS.
type SandboxNetworkPolicy struct {
	Enabled            *bool    `json:"enabled,omitempty"`
	AllowEgress        *bool    `json:"allowEgress,omitempty"`
	AllowedEgressCIDRs []string `json:"allowedEgressCidrs,omitempty" schema:"cidr"`
}

// Governance is namespace-wide scheduling and quota.
type Governance struct {
	PriorityClassName string                 `json:"priorityClassName,omitempty" schema:"dns1123subdomain"`
	ResourceQuota     *ResourceQuotaSettings `json:"resourceQuota,omitempty"`
	LimitRange        *LimitRangeSettings    `json:"limitRange,omitempty"`
	Security          *GPUSecurity           `json:"security,omitempty"`
}

// ResourceQuotaSettings render a ResourceQuota when enabled.
type ResourceQuotaSettings struct {
	Enabled bool              `json:"enabled"`
	Hard    map[string]string `json:"hard" schema:"quantity"`
}

// LimitRangeSettings render a LimitRange for containers when enabled.
type LimitRangeSettings struct {
	Enabled        bool              `json:"enabled"`
	Default        map[string]string `json:"default,omitempty" schema:"quantity"`
	DefaultRequest map[string]string `json:"defaultRequest,omitempty" schema:"quantity"`
	Max            map[string]string `json:"max,omitempty" schema:"quantity"`
}

// GPUSecurity is the opt-in hardening of the GPU fleets: no privilege
// escalation, the runtime's seccomp profile, and every Linux capability
// dropped but those a named option adds back.
type GPUSecurity struct {
	Enabled      bool `json:"enabled"`
	RunAsNonRoot bool `json:"runAsNonRoot,omitempty"`
	// IPCLock adds back IPC_LOCK, which RDMA (InfiniBand, RoCE) needs to pin
	// NCCL's memory.
	IPCLock bool `json:"ipcLock,omitempty"`
}

var infraShapes = map[string]reflect.Type{"kuberay.spec": reflect.TypeFor[rayv1.RayClusterSpec]()}

// ParseRecipe decodes a recipe strictly: an unknown or mistyped field is a
// *SpecError naming its path and line. file is used in messages only.
func ParseRecipe(file string, data []byte) (*Recipe, error) {
	r := &Recipe{}
	if err := decodeStrict(file, data, r, nil); err != nil {
		return nil, err
	}
	return r, r.validate(file)
}

// ParseInfra decodes an infra spec strictly, like ParseRecipe.
func ParseInfra(file string, data []byte) (*Infra, error) {
	in := &Infra{}
	if err := decodeStrict(file, data, in, infraShapes); err != nil {
		return nil, err
	}
	return in, in.validate(file)
}

// LoadRecipe reads and parses a recipe file.
func LoadRecipe(path string) (*Recipe, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseRecipe(path, data)
}

// LoadInfra reads and parses an infra spec file.
func LoadInfra(path string) (*Infra, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseInfra(path, data)
}
