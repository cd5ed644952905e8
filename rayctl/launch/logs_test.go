package launch_test

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	rayfake "github.com/ray-project/kuberay/ray-operator/pkg/client/clientset/versioned/fake"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"gridweave.dev/rayctl/launch"
)

// TestLogsFindTheSubmitterWhereverItRuns: "submitter" is the submitter
// Job's pod of a RayJob in K8sJobMode, and the head pod's submitter
// container in SidecarMode; a launch with neither has no submitter.
func TestLogsFindTheSubmitterWhereverItRuns(t *testing.T) {
	head := func(name string, containers ...string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns",
			Labels: map[string]string{"ray.io/cluster": "hello", "ray.io/node-type": "head"}}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		for _, c := range containers {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c})
		}
		return p
	}
	submitterJob := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "hello-abcde", Namespace: "ns",
		Labels: map[string]string{"batch.kubernetes.io/job-name": "hello"}}, Status: corev1.PodStatus{Phase: corev1.PodRunning},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "ray-job-submitter"}}}}
	for _, tc := range []struct {
		name                   string
		pods                   []*corev1.Pod
		wantPod, wantContainer string // whose log is shown; "" for none
	}{
		{"K8sJobMode", []*corev1.Pod{head("hello-head-x", "ray-head"), submitterJob}, "hello-abcde", "ray-job-submitter"},
		{"SidecarMode", []*corev1.Pod{head("hello-head-y", "ray-head", "ray-job-submitter")}, "hello-head-y", "ray-job-submitter"},
		{"no submitter", []*corev1.Pod{head("hello-head-z", "ray-head")}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kube := kubefake.NewClientset()
			for _, p := range tc.pods {
				if _, err := kube.CoreV1().Pods("ns").Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			s := &launch.Session{Kube: kube, Ray: rayfake.NewClientset()}
			var out bytes.Buffer
			err := s.Logs(context.Background(), "ns", "hello", launch.LogOptions{Target: "submitter"}, &out)
			switch {
			case tc.wantPod == "" && (err == nil || !strings.Contains(err.Error(), `no pods of "submitter"`)):
				t.Errorf("logs: %v, want no submitter found:\n%s", err, out.String())
			case tc.wantPod != "" && (err != nil || !strings.HasPrefix(out.String(), "["+tc.wantPod+"] ") || strings.Count(out.String(), "\n") != 1):
				t.Errorf("logs: %v:\n%s\nwant one line of %s", err, out.String(), tc.wantPod)
			}
			// The container whose log was asked for.
			var containers []string
			for _, a := range kube.Actions() {
				if a.GetSubresource() == "log" {
					containers = append(containers, a.(k8stesting.GenericAction).GetValue().(*corev1.PodLogOptions).Container)
				}
			}
			if want := []string{tc.wantContainer}; tc.wantPod != "" && !slices.Equal(containers, want) {
				t.Errorf("the log of containers %q was read, want %q", containers, want)
			}
		})
	}
}
