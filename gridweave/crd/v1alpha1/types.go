package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is gridweave.dev/v1alpha1.
var GroupVersion = schema.GroupVersion{Group: "gridweave.dev", Version: "v1alpha1"}

// Job phases.
const (
	JobPending   = "Pending"
	JobRunning   = "Running"
	JobSucceeded = "Succeeded"
	JobFailed    = "Failed"
	JobStopped   = "Stopped"
)

// GridweaveJobSpec is a job the gateway runs on a RayCluster.
// +kubebuilder:validation:XValidation:rule="!has(self.resources) || !has(self.resources.gpusPerWorker) || self.resources.gpusPerWorker == 0 || has(self.resources.gpuType)",message="resources.gpuType is required when resources.gpusPerWorker is set"
type GridweaveJobSpec struct {
	// Owner is the user the gateway acts for.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Owner string `json:"owner"`
	// Cluster is the RayCluster the job runs on.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Cluster string `json:"cluster"`
	// Entrypoint is the command Ray runs.
	// +kubebuilder:validation:MinLength=1
	Entrypoint string `json:"entrypoint"`
	// Image is the container image the job's code expects, if any.
	// +optional
	Image string `json:"image,omitempty"`
	// Resources the job asks for.
	// +optional
	Resources *JobResources `json:"resources,omitempty"`
	// RuntimeEnv is Ray's runtime_env for the job (working_dir, env_vars, pip, ...).
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	RuntimeEnv *runtime.RawExtension `json:"runtimeEnv,omitempty"`
	// SubmissionID is the Ray job's submission id, once submitted.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	SubmissionID string `json:"submissionId,omitempty"`
}

// JobResources size a job.
type JobResources struct {
	// Workers is how many GPU workers the job spans.
	// +kubebuilder:validation:Minimum=1
	// +optional
	Workers int32 `json:"workers,omitempty"`
	// GPUsPerWorker is the GPUs each worker uses.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=16
	// +optional
	GPUsPerWorker int32 `json:"gpusPerWorker,omitempty"`
	// GPUType is the GPU product, e.g. NVIDIA-H100-80GB-HBM3.
	// +optional
	GPUType string `json:"gpuType,omitempty"`
	// CPU and Memory per worker, as Kubernetes quantities.
	// +optional
	CPU *resource.Quantity `json:"cpu,omitempty"`
	// +optional
	Memory *resource.Quantity `json:"memory,omitempty"`
}

// GridweaveJobStatus follows the Ray job.
type GridweaveJobStatus struct {
	// +kubebuilder:validation:Enum=Pending;Running;Succeeded;Failed;Stopped
	// +optional
	Phase string `json:"phase,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// +optional
	EndTime *metav1.Time `json:"endTime,omitempty"`
}

// GridweaveJob is a job the gateway runs on a RayCluster for an owner.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=gwjob;gwjobs,categories=gridweave
// +kubebuilder:printcolumn:name="Owner",type=string,JSONPath=`.spec.owner`
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.cluster`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Submission",type=string,JSONPath=`.spec.submissionId`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type GridweaveJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   GridweaveJobSpec   `json:"spec"`
	Status GridweaveJobStatus `json:"status,omitempty"`
}

// GridweaveJobList is a list of GridweaveJobs.
// +kubebuilder:object:root=true
type GridweaveJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GridweaveJob `json:"items"`
}

// Endpoint phases.
const (
	EndpointPending  = "Pending"
	EndpointReady    = "Ready"
	EndpointUpdating = "Updating"
	EndpointFailed   = "Failed"
)

// Hardware is what each replica of an endpoint runs on.
type Hardware struct {
	// GPUType is the GPU product (the nvidia.com/gpu.product node label),
	// e.g. NVIDIA-H100-80GB-HBM3.
	// +kubebuilder:validation:MinLength=1
	GPUType string `json:"gpuType"`
	// GPUs per replica.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=16
	GPUs int32 `json:"gpus"`
}

// GridweaveEndpointSpec is a model served by Ray Serve.
// +kubebuilder:validation:XValidation:rule="has(self.model) || has(self.serveApp)",message="one of model or serveApp is required"
// +kubebuilder:validation:XValidation:rule="!has(self.minReplicas) || self.minReplicas <= self.replicas",message="minReplicas must not exceed replicas"
type GridweaveEndpointSpec struct {
	// Name is the endpoint's public name (GET /v1/crd/endpoints/by-name/{name}).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
	// Cluster is the RayCluster that serves it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Cluster string `json:"cluster"`
	// Model is the model served (e.g. a Hugging Face id).
	// +optional
	Model string `json:"model,omitempty"`
	// ServeApp is the Ray Serve application's name.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	ServeApp string `json:"serveApp,omitempty"`
	// RoutePrefix is where Serve exposes it.
	// +kubebuilder:validation:Pattern=`^/[^\s]*$`
	// +kubebuilder:default="/"
	// +optional
	RoutePrefix string `json:"routePrefix,omitempty"`
	// Hardware per replica.
	Hardware Hardware `json:"hardware"`
	// Replicas of the model.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	Replicas int32 `json:"replicas"`
	// MinReplicas, when autoscaling.
	// +kubebuilder:validation:Minimum=0
	// +optional
	MinReplicas *int32 `json:"minReplicas,omitempty"`
}

// GridweaveEndpointStatus is the endpoint as it runs.
type GridweaveEndpointStatus struct {
	// +kubebuilder:validation:Enum=Pending;Ready;Updating;Failed
	// +optional
	Phase string `json:"phase,omitempty"`
	// +optional
	URL string `json:"url,omitempty"`
	// +kubebuilder:validation:Minimum=0
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// Hardware the endpoint's workers run on now.
	// +optional
	Hardware *Hardware `json:"hardware,omitempty"`
	// WorkerGroup is the RayCluster's worker group serving it.
	// +optional
	WorkerGroup string `json:"workerGroup,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
}

// GridweaveEndpoint is a model served by Ray Serve on a RayCluster.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=gwep;gweps,categories=gridweave
// +kubebuilder:printcolumn:name="Name",type=string,JSONPath=`.spec.name`
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.cluster`
// +kubebuilder:printcolumn:name="GPU",type=string,JSONPath=`.spec.hardware.gpuType`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.status.url`,priority=1
type GridweaveEndpoint struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   GridweaveEndpointSpec   `json:"spec"`
	Status GridweaveEndpointStatus `json:"status,omitempty"`
}

// GridweaveEndpointList is a list of GridweaveEndpoints.
// +kubebuilder:object:root=true
type GridweaveEndpointList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GridweaveEndpoint `json:"items"`
}
