package launch_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"gridweave.dev/rayctl/launch"
)

func TestSchedulingReasonInPlainWords(t *testing.T) {
	for _, c := range []struct{ scheduler, want string }{
		{"0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: infra}, 2 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.",
			"1 node has a taint the pod does not tolerate ({dedicated: infra}); not enough nvidia.com/gpu on 2 of 3 nodes"},
		{"0/4 nodes are available: 4 Insufficient nvidia.com/gpu.", "not enough nvidia.com/gpu on 4 of 4 nodes"},
		// Kubernetes 1.35's wording, with dynamic resource allocation.
		{"0/4 nodes are available: 4 Insufficient nvidia.com/gpu. no new claims to deallocate, preemption: 0/4 nodes are available: 4 No preemption victims found for incoming pod.",
			"not enough nvidia.com/gpu on 4 of 4 nodes"},
		{"0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector.", "2 nodes do not match the pod's node selector or affinity"},
		{"0/1 nodes are available: 1 node(s) were unschedulable.", "1 node is cordoned"},
		{"0/0 nodes are available", "the cluster has no nodes the scheduler can use"},
		{"no nodes available to schedule pods", "the cluster has no nodes the scheduler can use"},
		{"0/5 nodes are available: 5 Too many pods.", "5 nodes already run as many pods as they allow"},
		{"something the scheduler never said", "something the scheduler never said"},
	} {
		if got := launch.SchedulingReason(c.scheduler); got != c.want {
			t.Errorf("%q\n got %q\nwant %q", c.scheduler, got, c.want)
		}
	}
}

func pod(name string, labels map[string]string, phase corev1.PodPhase, mutate func(*corev1.Pod)) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Status: corev1.PodStatus{Phase: phase}}
	if mutate != nil {
		mutate(&p)
	}
	return p
}

func unschedulable(msg string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: msg}}
	}
}

func TestExplainGroupsPodsByFleetAndReason(t *testing.T) {
	trainer := map[string]string{"ray.io/group": "trainer", "ray.io/node-type": "worker"}
	noGPU := unschedulable("0/3 nodes are available: 3 Insufficient nvidia.com/gpu.")
	pods := []corev1.Pod{
		pod("t-1", trainer, corev1.PodPending, noGPU),
		pod("t-2", trainer, corev1.PodPending, noGPU),
		pod("head-1", map[string]string{"ray.io/node-type": "head"}, corev1.PodRunning, nil),
		pod("sb-1", map[string]string{"app.kubernetes.io/component": "sandbox"}, corev1.PodPending, func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "executor", Image: "ghcr.io/x/y:1", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "pull access denied"}}}}
		}),
		pod("inf-1", map[string]string{"ray.io/group": "inference"}, corev1.PodRunning, func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "ray-worker", RestartCount: 4, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}
		}),
		pod("sb-2", map[string]string{"app.kubernetes.io/component": "sandbox"}, corev1.PodPending, nil),
	}
	got := strings.Join(launch.Explain(pods), "\n")
	for _, want := range []string{
		"2 trainer pods Pending: not enough nvidia.com/gpu on 3 of 3 nodes (t-1, t-2)",
		"1 sandbox pod Pending: container executor cannot pull image ghcr.io/x/y:1 (ImagePullBackOff: pull access denied) (sb-1)",
		"1 inference pod Running: container ray-worker keeps crashing (4 restarts; see launcher logs --previous) (inf-1)",
		"1 head running; 0 sandbox running, 1 starting",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
}
