package rayctl_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"gridweave.dev/rayctl"
	"gridweave.dev/rayctl/rayctltest"
)

func TestWaitJobFinished(t *testing.T) {
	job := func(name string, deployment rayv1.JobDeploymentStatus, status rayv1.JobStatus) *rayv1.RayJob {
		return &rayv1.RayJob{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
			Status: rayv1.RayJobStatus{JobDeploymentStatus: deployment, JobStatus: status, Message: "as reported"}}
	}
	f := rayctltest.New(t, "ns",
		job("done", rayv1.JobDeploymentStatusComplete, rayv1.JobStatusSucceeded),
		job("stopped", rayv1.JobDeploymentStatusComplete, rayv1.JobStatusStopped),
		job("failed", rayv1.JobDeploymentStatusFailed, rayv1.JobStatusFailed),
	)
	ctx := context.Background()
	opts := rayctl.WaitOptions{Timeout: 20 * time.Second}
	if err := f.Client.WaitJobFinished(ctx, "", "done", opts); err != nil {
		t.Errorf("succeeded job: %v", err)
	}
	err := f.Client.WaitJobFinished(ctx, "", "stopped", opts)
	if !errors.Is(err, rayctl.ErrJobStopped) || errors.Is(err, rayctl.ErrFailed) || !strings.Contains(err.Error(), "ns/stopped") {
		t.Errorf("stopped job: %v, want an error naming it and wrapping ErrJobStopped", err)
	}
	if err := f.Client.WaitJobFinished(ctx, "", "failed", opts); !errors.Is(err, rayctl.ErrFailed) {
		t.Errorf("failed job: %v, want ErrFailed", err)
	}
}
