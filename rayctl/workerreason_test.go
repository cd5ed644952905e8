package rayctl

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestWorkerSaysWhyItWaits: a pending worker carries the scheduler's
// message, or a waiting container's reason; a running one none.
func TestWorkerSaysWhyItWaits(t *testing.T) {
	unschedulable := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."}}}}
	pulling := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{
		{Name: "ray-worker", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "back-off pulling image"}}}}}}
	running := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	for pod, want := range map[*corev1.Pod]string{
		unschedulable: "Unschedulable: 0/4 nodes are available: 4 Insufficient nvidia.com/gpu.",
		pulling:       "ray-worker: ImagePullBackOff back-off pulling image",
		running:       "",
	} {
		if got := workerOf(pod).Reason; got != want {
			t.Errorf("reason %q, want %q", got, want)
		}
	}
}
