package realnode_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"gridweave.dev/deploy/rayimage"
	"gridweave.dev/internal/raytest"
	"gridweave.dev/internal/testcluster"
)

// TestKubeRayRunsTheRayImageOnARealNode: the head/CPU image built by
// deploy/rayimage, imported into a real node's containerd, runs the head
// pod the KubeRay operator makes for a RayCluster: KubeRay's own command
// (bash -lc, ulimit, ray start), user and probes; the pod is Ready by the
// probes of Ray's health endpoint, at an address of the node's pod CIDR,
// the RayCluster is ready, and Ray's dashboard in the pod lists the head
// node alive at the pod's address.
func TestKubeRayRunsTheRayImageOnARealNode(t *testing.T) {
	if testing.Short() {
		t.Skip("a real kubelet and containerd, and the Ray image; run make test")
	}
	tc := testcluster.Shared(t)
	ctx := context.Background()
	imageTar := filepath.Join(t.TempDir(), "head.tar")
	if _, err := rayimage.Build(ctx, rayimage.Options{Kind: rayimage.Head}, imageTar, ""); err != nil {
		t.Fatal(err)
	}
	const name = "realnode-ray"
	n := startNode(t, tc, name, "198.18.231.9", "198.18.231.10")
	began := time.Now()
	n.importImages(t, imageTar)
	t.Logf("the Ray image imported in %.1fs", time.Since(began).Seconds())

	rc := &rayv1.RayCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "image-check", Namespace: "default"},
		Spec: rayv1.RayClusterSpec{
			RayVersion: rayimage.RayVersion,
			HeadGroupSpec: rayv1.HeadGroupSpec{
				RayStartParams: map[string]string{"num-cpus": "1", "dashboard-host": "0.0.0.0"},
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					NodeName: name,
					Containers: []corev1.Container{{
						Name: "ray-head", Image: rayimage.HeadTag, ImagePullPolicy: corev1.PullNever,
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("512Mi")},
							Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("2Gi")},
						},
					}},
				}},
			},
		},
	}
	if _, err := tc.Ray.RayV1().RayClusters("default").Create(ctx, rc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = tc.Ray.RayV1().RayClusters("default").Delete(context.Background(), rc.Name, metav1.DeleteOptions{})
	})
	created := time.Now()
	var head corev1.Pod
	if err := waitFor(4*time.Minute, func() error {
		pods, err := tc.Kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "ray.io/cluster=" + rc.Name + ",ray.io/node-type=head"})
		if err != nil {
			return err
		}
		if len(pods.Items) != 1 {
			return fmt.Errorf("%d head pods", len(pods.Items))
		}
		head = pods.Items[0]
		for _, c := range head.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("head pod %s %s, not Ready: %v %v", head.Name, head.Status.Phase, head.Status.Conditions, head.Status.ContainerStatuses)
	}); err != nil {
		t.Fatalf("KubeRay's head pod: %v", err)
	}
	t.Logf("head pod %s Ready at %s, %.1fs after the RayCluster", head.Name, head.Status.PodIP, time.Since(created).Seconds())
	if ip, err := netip.ParseAddr(head.Status.PodIP); err != nil || !n.podCIDR.Contains(ip) {
		t.Errorf("the head pod's address %q is not in the node's pod CIDR %s", head.Status.PodIP, n.podCIDR)
	}
	c := head.Spec.Containers[0]
	if len(c.Command) == 0 || c.Command[0] != "/bin/bash" || c.ReadinessProbe == nil {
		t.Errorf("not the container KubeRay makes: command %q, readiness probe %v", c.Command, c.ReadinessProbe)
	}
	if err := waitFor(time.Minute, func() error {
		got, err := tc.Ray.RayV1().RayClusters("default").Get(ctx, rc.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got.Status.State != rayv1.Ready {
			return fmt.Errorf("RayCluster state %q", got.Status.State)
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
	// Ray's own view, from its dashboard in the pod (asked from the
	// machine, which reaches its pods): the head node alive at the pod's
	// address.
	dashboard := "http://" + net.JoinHostPort(head.Status.PodIP, "8265") + "/api/v0/nodes?limit=10&detail=1"
	out, err := n.m.NS.Command("curl", "-sS", "--max-time", "20", dashboard).Output()
	if err != nil {
		t.Fatalf("GET %s from the machine: %v", dashboard, err)
	}
	var listed struct {
		Data struct {
			Result struct {
				Result []raytest.NodeState `json:"result"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(out, &listed); err != nil {
		t.Fatalf("Ray's node list: %v: %s", err, out)
	}
	nodes := listed.Data.Result.Result
	if len(nodes) != 1 || nodes[0].IP != head.Status.PodIP || nodes[0].State != "ALIVE" || !nodes[0].IsHead {
		t.Errorf("Ray's nodes: %+v, want the head alive at %s", nodes, head.Status.PodIP)
	}
	t.Logf("Ray's nodes, from the dashboard in the pod: %+v", nodes)
}
