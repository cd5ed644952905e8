package rayctl

import (
	"context"
	"fmt"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// CreateJob validates a RayJob with KubeRay's rules (metadata and spec,
// including the embedded cluster spec) and creates it.
func (c *Client) CreateJob(ctx context.Context, job *rayv1.RayJob) (*rayv1.RayJob, error) {
	job = job.DeepCopy()
	job.Namespace = c.ns(job.Namespace)
	if err := operatorJobMetadata(job.ObjectMeta); err != nil {
		return nil, &InvalidSpecError{Field: "metadata.name", Problem: err.Error()}
	}
	if err := operatorJobSpec(job); err != nil {
		return nil, &InvalidSpecError{Field: "spec", Problem: err.Error()}
	}
	out, err := c.ray.RayV1().RayJobs(job.Namespace).Create(ctx, job, metav1.CreateOptions{FieldManager: FieldManager})
	if err != nil {
		return nil, fmt.Errorf("create RayJob %s/%s: %w", job.Namespace, job.Name, err)
	}
	c.log.InfoContext(ctx, "RayJob created", "namespace", out.Namespace, "name", out.Name)
	return out, nil
}

// GetJob returns a RayJob, or an error wrapping ErrNotFound.
func (c *Client) GetJob(ctx context.Context, namespace, name string) (*rayv1.RayJob, error) {
	namespace = c.ns(namespace)
	j, err := c.ray.RayV1().RayJobs(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%w: RayJob %s/%s", ErrNotFound, namespace, name)
	}
	return j, err
}

// JobStatus is the part of a RayJob's status people look at.
type JobStatus struct {
	DeploymentStatus string `json:"deployment_status"` // Initializing, Running, Complete, Failed, ...
	JobStatus        string `json:"job_status"`        // PENDING, RUNNING, SUCCEEDED, FAILED, STOPPED
	JobID            string `json:"job_id,omitempty"`
	Cluster          string `json:"cluster,omitempty"`
	DashboardURL     string `json:"dashboard_url,omitempty"`
	Message          string `json:"message,omitempty"`
	Failed           int32  `json:"failed"`
	Succeeded        int32  `json:"succeeded"`
}

// JobStatus returns a RayJob's status.
func (c *Client) JobStatus(ctx context.Context, namespace, name string) (JobStatus, error) {
	j, err := c.GetJob(ctx, namespace, name)
	if err != nil {
		return JobStatus{}, err
	}
	return JobStatus{
		DeploymentStatus: string(j.Status.JobDeploymentStatus), JobStatus: string(j.Status.JobStatus),
		JobID: j.Status.JobId, Cluster: j.Status.RayClusterName, DashboardURL: j.Status.DashboardURL,
		Message: j.Status.Message, Failed: ptr.Deref(j.Status.Failed, 0), Succeeded: ptr.Deref(j.Status.Succeeded, 0),
	}, nil
}

// DeleteJob deletes a RayJob (and, through ownership, a cluster it made).
func (c *Client) DeleteJob(ctx context.Context, namespace, name string) error {
	namespace = c.ns(namespace)
	err := c.ray.RayV1().RayJobs(namespace).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: RayJob %s/%s", ErrNotFound, namespace, name)
	}
	return err
}

// CreateService validates a RayService with KubeRay's rules and creates it.
func (c *Client) CreateService(ctx context.Context, svc *rayv1.RayService) (*rayv1.RayService, error) {
	svc = svc.DeepCopy()
	svc.Namespace = c.ns(svc.Namespace)
	if err := operatorServiceMetadata(svc.ObjectMeta); err != nil {
		return nil, &InvalidSpecError{Field: "metadata", Problem: err.Error()}
	}
	if err := operatorServiceSpec(svc); err != nil {
		return nil, &InvalidSpecError{Field: "spec", Problem: err.Error()}
	}
	out, err := c.ray.RayV1().RayServices(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{FieldManager: FieldManager})
	if err != nil {
		return nil, fmt.Errorf("create RayService %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	c.log.InfoContext(ctx, "RayService created", "namespace", out.Namespace, "name", out.Name)
	return out, nil
}

// GetService returns a RayService, or an error wrapping ErrNotFound.
func (c *Client) GetService(ctx context.Context, namespace, name string) (*rayv1.RayService, error) {
	namespace = c.ns(namespace)
	s, err := c.ray.RayV1().RayServices(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%w: RayService %s/%s", ErrNotFound, namespace, name)
	}
	return s, err
}

// ServiceStatus is the part of a RayService's status people look at.
type ServiceStatus struct {
	Ready          bool              `json:"ready"`
	Reason         string            `json:"reason,omitempty"`
	ActiveCluster  string            `json:"active_cluster,omitempty"`
	PendingCluster string            `json:"pending_cluster,omitempty"`
	Applications   map[string]string `json:"applications,omitempty"` // name → status
}

// ServiceStatus returns a RayService's status.
func (c *Client) ServiceStatus(ctx context.Context, namespace, name string) (ServiceStatus, error) {
	s, err := c.GetService(ctx, namespace, name)
	if err != nil {
		return ServiceStatus{}, err
	}
	st := ServiceStatus{ActiveCluster: s.Status.ActiveServiceStatus.RayClusterName, PendingCluster: s.Status.PendingServiceStatus.RayClusterName}
	for _, cond := range s.Status.Conditions {
		if cond.Type == string(rayv1.RayServiceReady) {
			st.Ready = cond.Status == metav1.ConditionTrue
			st.Reason = cond.Reason
		}
	}
	for app, as := range s.Status.ActiveServiceStatus.Applications {
		if st.Applications == nil {
			st.Applications = map[string]string{}
		}
		st.Applications[app] = as.Status
	}
	return st, nil
}

// DeleteService deletes a RayService and, through ownership, its clusters.
func (c *Client) DeleteService(ctx context.Context, namespace, name string) error {
	namespace = c.ns(namespace)
	err := c.ray.RayV1().RayServices(namespace).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: RayService %s/%s", ErrNotFound, namespace, name)
	}
	return err
}
