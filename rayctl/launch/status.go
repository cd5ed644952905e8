package launch

import (
	"context"
	"fmt"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"gridweave.dev/rayctl"
)

// Status is a launch as it stands.
type Status struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	// Cluster is the RayCluster's state ("" when there is none).
	Cluster string `json:"cluster,omitempty"`
	// Job is the RayJob's job and deployment status, when it is one.
	Job *JobState `json:"job,omitempty"`
	// Fleets hold pods, not replicas: with numOfHosts a replica is
	// several pods.
	Fleets []FleetStatus `json:"fleets"`
	// Dashboard is how to reach the Ray dashboard.
	Dashboard string `json:"dashboard,omitempty"`
}

// JobState is a RayJob's status.
type JobState struct {
	DeploymentStatus string `json:"deploymentStatus"`
	JobStatus        string `json:"jobStatus"`
	JobID            string `json:"jobId,omitempty"`
	Message          string `json:"message,omitempty"`
}

// FleetStatus is the pods of one fleet.
type FleetStatus struct {
	Fleet   string      `json:"fleet"`
	Running int         `json:"running"`
	Pods    []PodStatus `json:"pods"`
}

// PodStatus is one pod.
type PodStatus struct {
	Name   string `json:"name"`
	Phase  string `json:"phase"`
	Node   string `json:"node,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// Status reports the launch called name.
func (s *Session) Status(ctx context.Context, namespace, name string) (*Status, error) {
	st := &Status{Name: name, Namespace: namespace}
	found := false
	if job, err := s.Ray.RayV1().RayJobs(namespace).Get(ctx, name, metav1.GetOptions{}); err == nil {
		found = true
		st.Job = &JobState{DeploymentStatus: string(job.Status.JobDeploymentStatus), JobStatus: string(job.Status.JobStatus), JobID: job.Status.JobId, Message: job.Status.Message}
	} else if !apierrors.IsNotFound(err) {
		return nil, err
	}
	if rc, err := s.Ray.RayV1().RayClusters(namespace).Get(ctx, name, metav1.GetOptions{}); err == nil {
		found = true
		st.Cluster = rayctl.ClusterState(rc)
	} else if !apierrors.IsNotFound(err) {
		return nil, err
	}
	pods, err := s.podsOf(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	if !found && len(pods) == 0 {
		return nil, fmt.Errorf("no launch %s in namespace %s (no RayCluster, RayJob or pods labelled app.kubernetes.io/instance=%s)", name, namespace, name)
	}
	fleets := map[string]*FleetStatus{}
	for i := range pods {
		p := &pods[i]
		f := Fleet(p)
		if fleets[f] == nil {
			fleets[f] = &FleetStatus{Fleet: f}
		}
		fs := fleets[f]
		fs.Pods = append(fs.Pods, PodStatus{Name: p.Name, Phase: string(p.Status.Phase), Node: p.Spec.NodeName, Reason: PodProblem(p)})
		if p.Status.Phase == "Running" {
			fs.Running++
		}
	}
	for _, f := range fleets {
		sort.Slice(f.Pods, func(i, j int) bool { return f.Pods[i].Name < f.Pods[j].Name })
		st.Fleets = append(st.Fleets, *f)
	}
	sort.Slice(st.Fleets, func(i, j int) bool { return st.Fleets[i].Fleet < st.Fleets[j].Fleet })
	if rc, err := s.rayCluster(ctx, namespace, name); err == nil {
		head := headServiceName(rc)
		if s.restConfig != nil {
			st.Dashboard = DashboardProxyURL(s.restConfig.Host, namespace, head) + "/ (or: kubectl -n " + namespace + " port-forward svc/" + head + " 8265)"
		} else {
			st.Dashboard = "kubectl -n " + namespace + " port-forward svc/" + head + " 8265"
		}
	}
	return st, nil
}
