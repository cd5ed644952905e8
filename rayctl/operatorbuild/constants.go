package operatorbuild

// CRD names the kind of object a cluster is made for: the operator builds
// a RayService's pods otherwise than a RayCluster's.
type CRD string

// The kinds a cluster is made for.
const (
	RayCluster CRD = "RayCluster"
	RayJob     CRD = "RayJob"
	RayService CRD = "RayService"
)

// OperatorVersion is the KubeRay operator release this package builds as.
const OperatorVersion = "v1.6.0"

// Labels the operator puts on what it builds, and reads.
const (
	ClusterLabel          = "ray.io/cluster"
	NodeTypeLabel         = "ray.io/node-type"
	GroupLabel            = "ray.io/group"
	RayNodeLabel          = "ray.io/is-ray-node"
	IdentifierLabel       = "ray.io/identifier"
	ServeLabel            = "ray.io/serve"
	OriginatedFromCRLabel = "ray.io/originated-from-cr-name"
	// OriginatedFromCRDLabel says which kind of object made a cluster.
	OriginatedFromCRDLabel = "ray.io/originated-from-crd"
	// GangSchedulingLabel turns gang scheduling on, of any value.
	GangSchedulingLabel   = "ray.io/gang-scheduling-enabled"
	AppNameLabel          = "app.kubernetes.io/name"
	CreatedByLabel        = "app.kubernetes.io/created-by"
	WorkerReplicaIndexKey = "ray.io/worker-group-replica-index"
	WorkerReplicaNameKey  = "ray.io/worker-group-replica-name"
	HostIndexKey          = "ray.io/replica-host-index"
	// JobClusterSelectorKey is the one key of a RayJob's clusterSelector
	// the operator reads.
	JobClusterSelectorKey = "ray.io/cluster"

	appName        = "kuberay"
	componentName  = "kuberay-operator"
	headGroupValue = "headgroup"
)

// Annotations the operator reads.
const (
	FTEnabledAnnotation                     = "ray.io/ft-enabled"
	ExternalStorageNamespaceAnnotation      = "ray.io/external-storage-namespace"
	OverwriteContainerCmdAnnotation         = "ray.io/overwrite-container-cmd"
	EnableServeServiceAnnotation            = "ray.io/enable-serve-service"
	DisableProvisionedHeadRestartAnnotation = "ray.io/disable-provisioned-head-restart"
	// IngressClassAnnotation is the cluster annotation the dashboard
	// Ingress takes its class from.
	IngressClassAnnotation = "kubernetes.io/ingress.class"
)

// Containers and ports the operator names.
const (
	SubmitterContainerName  = "ray-job-submitter"
	AutoscalerContainerName = "autoscaler"
	WaitGCSContainerName    = "wait-gcs-ready"
	DashboardPortName       = "dashboard"
	ServingPortName         = "serve"
	MetricsPortName         = "metrics"
	clientPortName          = "client"
	gcsServerPortName       = "gcs-server"

	defaultClientPort         = 10001
	defaultGCSPort            = 6379
	defaultDashboardPort      = 8265
	defaultMetricsPort        = 8080
	defaultServingPort        = 8000
	defaultDashboardAgentPort = 52365
)

// Environment variables the operator sets.
const (
	GeneratedStartCommandEnv = "KUBERAY_GEN_RAY_START_CMD"
	RedisAddressEnv          = "RAY_REDIS_ADDRESS"
	DashboardAddressEnv      = "RAY_DASHBOARD_ADDRESS"
	JobSubmissionIDEnv       = "RAY_JOB_SUBMISSION_ID"

	redisUsernameEnv        = "REDIS_USERNAME"
	redisPasswordEnv        = "REDIS_PASSWORD"
	externalStorageNSEnv    = "RAY_external_storage_namespace"
	gcsReconnectTimeoutEnv  = "RAY_gcs_rpc_server_reconnect_timeout_s"
	autoscalerV2Env         = "RAY_enable_autoscaler_v2"
	authModeEnv             = "RAY_AUTH_MODE"
	k8sTokenAuthEnv         = "RAY_ENABLE_K8S_TOKEN_AUTH"
	authTokenEnv            = "RAY_AUTH_TOKEN"
	clusterNameEnv          = "RAY_CLUSTER_NAME"
	clusterNamespaceEnv     = "RAY_CLUSTER_NAMESPACE"
	fqRayIPEnv              = "FQ_RAY_IP"
	rayIPEnv                = "RAY_IP"
	cloudInstanceIDEnv      = "RAY_CLOUD_INSTANCE_ID"
	nodeTypeNameEnv         = "RAY_NODE_TYPE_NAME"
	rayPortEnv              = "RAY_PORT"
	rayAddressEnv           = "RAY_ADDRESS"
	taskDeathInfoEnv        = "RAY_timeout_ms_task_wait_for_death_info"
	gcsRequestTimeoutEnv    = "RAY_gcs_server_request_timeout_seconds"
	serveKVTimeoutEnv       = "RAY_SERVE_KV_TIMEOUT_S"
	usageStatsInUseEnv      = "RAY_USAGE_STATS_KUBERAY_IN_USE"
	usageStatsExtraTagsEnv  = "RAY_USAGE_STATS_EXTRA_TAGS"
	dashboardDiskUsageEnv   = "RAY_DASHBOARD_ENABLE_K8S_DISK_USAGE"
	authTokenSecretKey      = "auth_token"
	tokenVolumeName         = "ray-token"
	tokenMountPath          = "/var/run/secrets/ray.io/serviceaccount"
	workerGCSReconnectAfter = "600"
	localHost               = "127.0.0.1"
)

// Probes the operator gives the Ray container.
const (
	nodeHealthPath        = "/api/healthz"
	rayletHealthPath      = "api/local_raylet_healthz"
	gcsHealthPath         = "api/gcs_healthz"
	serveProxyHealthPath  = "-/healthz"
	wgetHealthCommand     = "wget --tries 1 -T %d -q -O- http://localhost:%d/%s | grep success"
	serveReadinessFailure = 1
)

// probeTiming is the timing of a probe the operator adds.
type probeTiming struct {
	delay, timeout, headTimeout, period, successes, failures int32
}

var (
	livenessTiming  = probeTiming{delay: 30, timeout: 2, headTimeout: 5, period: 5, successes: 1, failures: 120}
	readinessTiming = probeTiming{delay: 10, timeout: 2, headTimeout: 5, period: 5, successes: 1, failures: 10}
)

// Volumes the operator adds.
const (
	sharedMemoryVolume = "shared-mem"
	sharedMemoryPath   = "/dev/shm"
	logVolume          = "ray-logs"
	logPath            = "/tmp/ray"
	plasmaDirectoryKey = "plasma-directory"
)

// Resources of the accelerators the operator passes to Ray by their own
// names.
var acceleratorRayResources = map[string]string{
	"aws.amazon.com/neuroncore": "neuron_cores",
	"google.com/tpu":            "TPU",
}
