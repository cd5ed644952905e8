package api

import "time"

// ClusterSummary is a RayCluster in a list.
type ClusterSummary struct {
	Name            string    `json:"name"`
	Namespace       string    `json:"namespace"`
	State           string    `json:"state"`
	DesiredWorkers  int32     `json:"desired_workers"`
	ReadyWorkers    int32     `json:"ready_workers"`
	WorkerGroups    []string  `json:"worker_groups"`
	HeadPodIP       string    `json:"head_pod_ip"`
	HeadServiceName string    `json:"head_service_name"`
	CreatedAt       time.Time `json:"created_at"`
}

// ClusterList answers GET /v1/kuberay/clusters.
type ClusterList struct {
	Clusters []ClusterSummary `json:"clusters"`
}

// ClusterDeleted answers DELETE /v1/kuberay/clusters/{name}.
type ClusterDeleted struct {
	Name    string `json:"name"`
	Deleted bool   `json:"deleted"`
}

// PodsDeleted answers DELETE .../worker-groups/{group}/pods.
type PodsDeleted struct {
	Cluster     string `json:"cluster"`
	Group       string `json:"group"`
	PodsDeleted bool   `json:"pods_deleted"`
}

// Deleted answers the deletes of the CRD and Ray proxies: the name of
// what went.
type Deleted struct {
	Deleted string `json:"deleted"`
}

// ServeApplication is one Ray Serve application and its deployments'
// statuses.
type ServeApplication struct {
	Name        string            `json:"name"`
	Status      string            `json:"status"`
	Message     string            `json:"message,omitempty"`
	RoutePrefix *string           `json:"route_prefix"`
	Deployments map[string]string `json:"deployments"`
}

// ServeStatuses answers GET /v1/ray/serve/statuses.
type ServeStatuses struct {
	Applications []ServeApplication `json:"applications"`
}
