package clusterapi

import (
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	"gridweave.dev/rayctl"
)

// ScaleRequest scales one worker group (replicas, min, max in one update).
type ScaleRequest struct {
	Group string `json:"group"`
	rayctl.Scale
}

// SwapRequest replaces one worker group by another in one update.
type SwapRequest struct {
	OldGroup string                `json:"old_group"`
	NewGroup rayv1.WorkerGroupSpec `json:"new_group"`
}

// ReplaceRequest replaces every worker group in one update.
type ReplaceRequest struct {
	WorkerGroups []rayv1.WorkerGroupSpec `json:"worker_groups"`
}

// WorkerList answers GET .../workers.
type WorkerList struct {
	Workers []rayctl.Worker `json:"workers"`
}

// GroupList answers GET .../worker-groups.
type GroupList struct {
	WorkerGroups []rayctl.GroupStatus `json:"worker_groups"`
}
