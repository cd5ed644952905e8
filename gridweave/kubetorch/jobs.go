package kubetorch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"gridweave.dev/gridweave/crd/v1alpha1"
)

// Label marks the GridweaveJobs training made.
const Label = "gridweave.dev/kubetorch"

// ErrJobNotFound is returned for a training job that does not exist (or
// that the caller may not see).
var ErrJobNotFound = errors.New("kubetorch: no such job")

// Jobs is a typed client of the GridweaveJobs of one namespace, over the
// dynamic client (the CRD has no generated clientset).
type Jobs struct {
	resource dynamic.ResourceInterface
}

// NewJobs is the GridweaveJobs of namespace.
func NewJobs(client dynamic.Interface, namespace string) *Jobs {
	return &Jobs{resource: client.Resource(v1alpha1.GroupVersion.WithResource(v1alpha1.JobResource)).Namespace(namespace)}
}

func toJob(u *unstructured.Unstructured) (*v1alpha1.GridweaveJob, error) {
	var job v1alpha1.GridweaveJob
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &job); err != nil {
		return nil, fmt.Errorf("the GridweaveJob %s: %w", u.GetName(), err)
	}
	return &job, nil
}

// Create creates job.
func (j *Jobs) Create(ctx context.Context, job *v1alpha1.GridweaveJob) (*v1alpha1.GridweaveJob, error) {
	job.APIVersion, job.Kind = v1alpha1.GroupVersion.String(), "GridweaveJob"
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(job)
	if err != nil {
		return nil, err
	}
	made, err := j.resource.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{FieldManager: "gridweave"})
	if err != nil {
		return nil, err
	}
	return toJob(made)
}

// Get reads the job name; ErrJobNotFound when there is none.
func (j *Jobs) Get(ctx context.Context, name string) (*v1alpha1.GridweaveJob, error) {
	u, err := j.resource.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%w: %s", ErrJobNotFound, name)
	}
	if err != nil {
		return nil, err
	}
	return toJob(u)
}

// List lists the jobs training made (the Label).
func (j *Jobs) List(ctx context.Context) ([]v1alpha1.GridweaveJob, error) {
	list, err := j.resource.List(ctx, metav1.ListOptions{LabelSelector: Label + "=true"})
	if err != nil {
		return nil, err
	}
	out := make([]v1alpha1.GridweaveJob, 0, len(list.Items))
	for i := range list.Items {
		job, err := toJob(&list.Items[i])
		if err != nil {
			return nil, err
		}
		out = append(out, *job)
	}
	return out, nil
}

// SetStatus sets the job's phase and message (an empty one too) and the
// times status has (the status subresource).
func (j *Jobs) SetStatus(ctx context.Context, name string, status v1alpha1.GridweaveJobStatus) error {
	fields := map[string]any{"phase": status.Phase, "message": status.Message}
	if status.StartTime != nil {
		fields["startTime"] = status.StartTime
	}
	if status.EndTime != nil {
		fields["endTime"] = status.EndTime
	}
	patch, err := json.Marshal(map[string]any{"status": fields})
	if err != nil {
		return err
	}
	_, err = j.resource.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "gridweave"}, "status")
	return err
}
