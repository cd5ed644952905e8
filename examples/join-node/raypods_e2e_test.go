package main

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"gridweave.dev/deploy/image"
	"gridweave.dev/deploy/rayimage"
	"gridweave.dev/gridweave/api"
	"gridweave.dev/internal/raytest"
)

// rayImagesTarball is the tarball a master of the Ray pods test serves as
// its worker image: the pause image and both Ray images deploy/rayimage
// builds (the head's and the GPU workers'), which every machine imports.
func rayImagesTarball(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	pause, err := image.BuildPause(ctx, "../..")
	if err != nil {
		t.Fatal(err)
	}
	images := map[string]v1.Image{image.PauseImage: pause}
	for _, kind := range []rayimage.Kind{rayimage.Head, rayimage.Worker} {
		img, err := rayimage.Image(ctx, rayimage.Options{Kind: kind})
		if err != nil {
			t.Fatal(err)
		}
		images[kind.Tag()] = img
	}
	path := filepath.Join(t.TempDir(), "images.tar")
	if err := image.WriteTarballs(images, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRayPodsAcrossTheFleet: three machines paste the join command of a
// kubelet-mode master whose worker image holds the Ray images; the
// server's clusters API creates the RayCluster with its head on the CPU
// machine, and the two GPU machines' registrations give it a worker
// group; KubeRay's head and worker pods run the built images on the real
// nodes, over direct links between the machines, the workers finding the
// head by its Service's name through the cluster's DNS over their
// tunnels. Ray lists the head and both workers alive at pod addresses of
// their machines' pod CIDRs; a job runs a task
// pinned to each and gets back each pod's name; a disconnect of one GPU
// machine removes its pod, Ray marks that node dead, and the worker
// group's replicas follow.
func TestRayPodsAcrossTheFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("real kubelets, containerd and Ray in pods; run make test")
	}
	ctx := context.Background()
	images := rayImagesTarball(t)
	m := startKubeletMasterWith(t, "WORKER_IMAGE_TAR="+images, "RAY_IMAGE_WORKER="+rayimage.WorkerTag, "RAY_IMAGE="+rayimage.HeadTag)
	tc := m.tc
	command := m.joinCommand()
	head := m.newKubeletMachine(51, "ray-h", false)
	a, b := m.newKubeletNode(52, "ray-a"), m.newKubeletNode(53, "ray-b")
	podCIDRs := map[string]netip.Prefix{}
	join := func(n *node) {
		t.Helper()
		began := time.Now()
		code, stdout, stderr := n.run(command)
		if code != 0 {
			t.Fatalf("%s: join exit %d: %s %s\nsupervisor: %s", n.hostname, code, stdout, stderr, n.nodeLog("supervisor.log"))
		}
		t.Cleanup(func() {
			if t.Failed() {
				for _, f := range []string{"supervisor.log", "kubelet.log", "containerd.log"} {
					t.Logf("%s's %s (tail):\n%s", n.hostname, f, tail(n.nodeLog(f), 3000))
				}
			}
		})
		node := waitNodeReady(t, tc.Kube, n.hostname, 90*time.Second)
		podCIDRs[n.hostname] = netip.MustParsePrefix(node.Spec.PodCIDR)
		t.Logf("%s: Node Ready %s after the join command began, pod CIDR %s", n.hostname, time.Since(began).Round(100*time.Millisecond), node.Spec.PodCIDR)
	}

	// The head's machine joins, and the cluster is made on it.
	join(head)
	created := time.Now()
	status, body := m.api("POST", "/v1/kuberay/clusters", map[string]any{
		"name": "gridweave-cluster", "image": rayimage.HeadTag, "ray_version": rayimage.RayVersion,
		"head": map[string]any{"cpu": "1", "memory": "2Gi", "node_selector": map[string]string{corev1.LabelHostname: "ray-h"},
			"ray_start_params": map[string]string{"num-cpus": "1", "dashboard-host": "0.0.0.0"}},
	})
	if status != 201 {
		t.Fatalf("POST /v1/kuberay/clusters: %d %v", status, body)
	}
	// The GPU machines join: their registrations add the pool's worker
	// group, one worker per machine.
	for _, n := range []*node{a, b} {
		join(n)
		n.machine.FakeGPUs(t, 1)
	}

	// The machines reach each other's underlay (a LAN), and their link
	// services make direct links; the master relays what they cannot.
	machines := []*node{head, a, b}
	enableForwarding(t, m.device, head.hostLink, a.hostLink, b.hostLink)
	for _, from := range machines {
		for _, to := range machines {
			if from != to {
				from.ns.IP(t, "route", "add", to.underlay.String()+"/32", "via", from.underlay.Prev().String())
			}
		}
	}
	for _, n := range machines {
		n.serve()
	}
	m.waitForLinks(linkStates{
		"ray-h": {"ray-a": api.LinkDirect, "ray-b": api.LinkDirect},
		"ray-a": {"ray-h": api.LinkDirect, "ray-b": api.LinkDirect},
		"ray-b": {"ray-h": api.LinkDirect, "ray-a": api.LinkDirect},
	}, 90*time.Second)

	var pods map[string]corev1.Pod // by machine
	if err := within(5*time.Minute, func() error {
		list, err := tc.Kube.CoreV1().Pods(m.namespace).List(ctx, metav1.ListOptions{LabelSelector: "ray.io/cluster=gridweave-cluster"})
		if err != nil {
			return err
		}
		pods = map[string]corev1.Pod{}
		var waiting []string
		for _, p := range list.Items {
			ready := slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
				return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
			})
			if !ready {
				waiting = append(waiting, fmt.Sprintf("%s on %q: %s %v", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.Conditions))
				continue
			}
			pods[p.Spec.NodeName] = p
		}
		if len(list.Items) != 3 || len(waiting) > 0 {
			return fmt.Errorf("%d pods; not Ready: %v", len(list.Items), waiting)
		}
		return nil
	}); err != nil {
		t.Fatalf("the Ray pods: %v", err)
	}
	t.Logf("head and both workers Ready %s after the cluster was made", time.Since(created).Round(100*time.Millisecond))
	for _, host := range []string{"ray-h", "ray-a", "ray-b"} {
		p, ok := pods[host]
		if !ok {
			t.Fatalf("no Ray pod on %s: %v", host, slices.Collect(mapKeys(pods)))
		}
		ip := netip.MustParseAddr(p.Status.PodIP)
		if !podCIDRs[host].Contains(ip) {
			t.Errorf("pod %s's address %s is not in %s's pod CIDR %s", p.Name, ip, host, podCIDRs[host])
		}
		if want := map[string]string{"ray-h": rayimage.HeadTag, "ray-a": rayimage.WorkerTag, "ray-b": rayimage.WorkerTag}[host]; p.Spec.Containers[0].Image != want {
			t.Errorf("pod %s runs %s, want %s", p.Name, p.Spec.Containers[0].Image, want)
		}
	}

	// Ray's view, from the head's dashboard (the host reaches pod
	// addresses as the master does: through the tunnels).
	dashboard := "http://" + netip.AddrPortFrom(netip.MustParseAddr(pods["ray-h"].Status.PodIP), 8265).String()
	alive := func() (map[string]string, error) {
		nodes, err := raytest.ListNodes(ctx, &http.Client{Timeout: 10 * time.Second}, dashboard)
		if err != nil {
			return nil, err
		}
		states := map[string]string{}
		for _, n := range nodes {
			if states[n.IP] != "ALIVE" {
				states[n.IP] = n.State
			}
		}
		return states, nil
	}
	if err := within(time.Minute, func() error {
		states, err := alive()
		if err != nil {
			return err
		}
		for host, p := range pods {
			if states[p.Status.PodIP] != "ALIVE" {
				return fmt.Errorf("Ray's nodes %v: %s's pod %s is not alive", states, host, p.Status.PodIP)
			}
		}
		t.Logf("Ray's nodes: %v", states)
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// A task pinned to each node returns its pod's name.
	want := "RAN ON " + strings.Join(slices.Sorted(func(yield func(string) bool) {
		for _, p := range pods {
			if !yield(p.Name) {
				return
			}
		}
	}), ",")
	logs, err := raytest.RunJob(raytest.HTTPJSON, dashboard, raytest.HostsScript, 2*time.Minute)
	if err != nil || !strings.Contains(logs, want) {
		t.Fatalf("a job: %v; want %q in its log:\n%s", err, want, tail(logs, 3000))
	}
	t.Logf("the job SUCCEEDED: %s", want)

	// b is disconnected: its pod goes with its drained Node, Ray marks
	// its node dead, and the pool's group asks for one worker.
	gone := pods["ray-b"]
	if status, body := m.api("POST", "/v1/nodes/disconnect", map[string]any{"hostname": "ray-b"}); status != 200 || body["released"] != true {
		t.Fatalf("disconnect: %d %v", status, body)
	}
	if err := within(2*time.Minute, func() error {
		if _, err := tc.Kube.CoreV1().Pods(m.namespace).Get(ctx, gone.Name, metav1.GetOptions{}); err == nil {
			return fmt.Errorf("pod %s still there", gone.Name)
		}
		states, err := alive()
		if err != nil {
			return err
		}
		if states[gone.Status.PodIP] != "DEAD" {
			return fmt.Errorf("Ray's nodes %v: %s not dead yet", states, gone.Status.PodIP)
		}
		rc, err := tc.Ray.RayV1().RayClusters(m.namespace).Get(ctx, "gridweave-cluster", metav1.GetOptions{})
		if err != nil {
			return err
		}
		var replicas []int32
		for _, g := range rc.Spec.WorkerGroupSpecs {
			replicas = append(replicas, *g.Replicas)
		}
		if !slices.Equal(replicas, []int32{1}) {
			return fmt.Errorf("worker group replicas %v, want [1]", replicas)
		}
		return nil
	}); err != nil {
		t.Fatalf("after ray-b's disconnect: %v", err)
	}
	t.Logf("ray-b disconnected: pod %s gone, its Ray node DEAD, the worker group at 1 replica", gone.Name)
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
