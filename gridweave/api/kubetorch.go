package api

import "time"

// BundleSynced answers POST /v1/kubetorch/sync: the bundle's id and the
// URL Ray's working_dir takes.
type BundleSynced struct {
	ID    string `json:"id"`
	URL   string `json:"url"`
	Size  int64  `json:"size"`
	Files int    `json:"files"`
}

// TrainRequest launches distributed training on a cluster's GPU workers.
type TrainRequest struct {
	Cluster string `json:"cluster"`
	Bundle  string `json:"bundle"`
	Command string `json:"command"`
	// Owner is the user the gateway acts for; default the caller's sub.
	Owner string `json:"owner,omitempty"`
	// Nodes and GPUsPerNode default to the cluster's ready GPU workers.
	Nodes       int               `json:"nodes,omitempty"`
	GPUsPerNode int               `json:"gpus_per_node,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
}

// TrainResponse names the launched job.
type TrainResponse struct {
	ID           string `json:"id"`
	SubmissionID string `json:"submission_id"`
	Owner        string `json:"owner"`
	Nodes        int    `json:"nodes"`
	GPUsPerNode  int    `json:"gpus_per_node"`
	Entrypoint   string `json:"entrypoint"`
}

// KubeTorchHealth answers GET /v1/kubetorch/health: whether training can
// start on a cluster.
type KubeTorchHealth struct {
	Cluster   string           `json:"cluster"`
	Dashboard DashboardHealth  `json:"dashboard"`
	GPUGroups []GPUGroupHealth `json:"gpu_groups"`
	// Healthy: the dashboard answers and every GPU group has all its pods
	// ready (and there is at least one).
	Healthy bool `json:"healthy"`
}

// DashboardHealth says whether the Ray dashboard answers.
type DashboardHealth struct {
	Reachable  bool   `json:"reachable"`
	RayVersion string `json:"ray_version,omitempty"`
	Error      string `json:"error,omitempty"`
}

// GPUGroupHealth is one GPU worker group's pods.
type GPUGroupHealth struct {
	Group      string `json:"group"`
	GPUsPerPod int64  `json:"gpus_per_pod"`
	Pods       int    `json:"pods"`
	Ready      int    `json:"ready"`
	Replicas   int32  `json:"replicas"`
}

// KubeTorchJob answers GET /v1/kubetorch/jobs/{id}: the Ray job's status
// and its last log lines (at most 20).
type KubeTorchJob struct {
	ID     string `json:"id"`
	Owner  string `json:"owner"`
	Status string `json:"status"`
	// Phase is the GridweaveJob phase the status maps to.
	Phase   string   `json:"phase"`
	Message string   `json:"message"`
	Logs    []string `json:"logs"`
}

// KubeTorchJobSummary is a KubeTorch job in a list: what the server last
// followed of it (GET /v1/kubetorch/jobs/{id} asks Ray now, with logs).
type KubeTorchJobSummary struct {
	ID        string    `json:"id"`
	Owner     string    `json:"owner"`
	Cluster   string    `json:"cluster"`
	Phase     string    `json:"phase" description:"The Ray job's status as last followed; empty before the first."`
	Message   string    `json:"message"`
	CreatedAt time.Time `json:"created_at"`
}

// KubeTorchJobList answers GET /v1/kubetorch/jobs: the caller's jobs (an
// admin's: every job), newest first.
type KubeTorchJobList struct {
	Jobs []KubeTorchJobSummary `json:"jobs"`
}
