package main

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"gridweave.dev/deploy/rayimage"
	"gridweave.dev/gridweave/api"
	"gridweave.dev/internal/raytest"
	"gridweave.dev/internal/realnode"
	"gridweave.dev/internal/testcluster"
)

// rayImagesTarball is the tarball a master of the Ray pods test serves as
// its worker image: the pause and test images and both Ray images
// deploy/rayimage builds (the head's and the GPU workers'), which every
// machine imports.
func rayImagesTarball(t testing.TB) string {
	t.Helper()
	path, err := realnode.RayImageTarball(context.Background(), "../..", nil)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// rayPodFleet is a kubelet-mode master whose worker image holds the Ray
// images and three machines that pasted its join command, linked
// directly: <prefix>-h without GPUs, <prefix>-a and <prefix>-b with one
// each. The server's clusters API made the RayCluster with its head on
// the CPU machine; the GPU machines' registrations gave it a worker
// group. KubeRay's head and worker pods run the built images on the real
// nodes, the workers finding the head by its Service's name through the
// cluster's DNS over their tunnels, and Ray lists all three alive at
// their pod addresses.
type rayPodFleet struct {
	m          *master
	head, a, b *node
	podCIDRs   map[string]netip.Prefix // by machine
	pods       map[string]corev1.Pod   // by machine
	services   map[string]*linkService // by machine
	// dashboard is the head's Ray dashboard, at its pod address (the
	// host reaches pod addresses as the master does: through the
	// tunnels).
	dashboard string
}

// startRayPodFleet makes a rayPodFleet of machines first, first+1 and
// first+2 (newNode's index).
func startRayPodFleet(t testing.TB, prefix string, first int) *rayPodFleet {
	t.Helper()
	ctx := context.Background()
	images := rayImagesTarball(t)
	m := startKubeletMasterWith(t, "WORKER_IMAGE_TAR="+images, "RAY_IMAGE_WORKER="+rayimage.WorkerTag, "RAY_IMAGE="+rayimage.HeadTag)
	tc := m.tc
	cordonOtherNodes(t, tc)
	command := m.joinCommand()
	f := &rayPodFleet{m: m, podCIDRs: map[string]netip.Prefix{}}
	f.head = m.newKubeletMachine(first, prefix+"-h", false)
	f.a, f.b = m.newKubeletNode(first+1, prefix+"-a"), m.newKubeletNode(first+2, prefix+"-b")
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
		f.podCIDRs[n.hostname] = netip.MustParsePrefix(node.Spec.PodCIDR)
		t.Logf("%s: Node Ready %s after the join command began, pod CIDR %s", n.hostname, time.Since(began).Round(100*time.Millisecond), node.Spec.PodCIDR)
	}

	// The head's machine joins, and the cluster is made on it.
	join(f.head)
	created := time.Now()
	status, body := m.api("POST", "/v1/kuberay/clusters", map[string]any{
		"name": "gridweave-cluster", "image": rayimage.HeadTag, "ray_version": rayimage.RayVersion,
		"head": map[string]any{"cpu": "1", "memory": "2Gi", "node_selector": map[string]string{corev1.LabelHostname: f.head.hostname},
			"ray_start_params": map[string]string{"num-cpus": "1", "dashboard-host": "0.0.0.0"}},
	})
	if status != 201 {
		t.Fatalf("POST /v1/kuberay/clusters: %d %v", status, body)
	}
	// The GPU machines join: their registrations add the pool's worker
	// group, one worker per machine.
	for _, n := range []*node{f.a, f.b} {
		join(n)
		n.machine.FakeGPUs(t, 1)
	}

	// The machines reach each other's underlay (a LAN), and their link
	// services make direct links; the master relays what they cannot.
	machines := f.machines()
	enableForwarding(t, m.device, f.head.hostLink, f.a.hostLink, f.b.hostLink)
	for _, from := range machines {
		for _, to := range machines {
			if from != to {
				from.ns.IP(t, "route", "add", to.underlay.String()+"/32", "via", from.underlay.Prev().String())
			}
		}
	}
	f.services = map[string]*linkService{}
	for _, n := range machines {
		f.services[n.hostname] = n.serve()
	}
	f.waitForLinks(api.LinkDirect)

	if err := within(5*time.Minute, func() error {
		list, err := tc.Kube.CoreV1().Pods(m.namespace).List(ctx, metav1.ListOptions{LabelSelector: "ray.io/cluster=gridweave-cluster"})
		if err != nil {
			return err
		}
		f.pods = map[string]corev1.Pod{}
		var waiting []string
		for _, p := range list.Items {
			ready := slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
				return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
			})
			if !ready {
				waiting = append(waiting, fmt.Sprintf("%s on %q: %s %v", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.Conditions))
				continue
			}
			f.pods[p.Spec.NodeName] = p
		}
		if len(list.Items) != 3 || len(waiting) > 0 {
			return fmt.Errorf("%d pods; not Ready: %v", len(list.Items), waiting)
		}
		return nil
	}); err != nil {
		t.Fatalf("the Ray pods: %v", err)
	}
	t.Logf("head and both workers Ready %s after the cluster was made", time.Since(created).Round(100*time.Millisecond))
	for _, n := range machines {
		if _, ok := f.pods[n.hostname]; !ok {
			t.Fatalf("no Ray pod on %s: %v", n.hostname, slices.Collect(mapKeys(f.pods)))
		}
	}
	f.dashboard = "http://" + netip.AddrPortFrom(netip.MustParseAddr(f.pods[f.head.hostname].Status.PodIP), 8265).String()
	if err := within(time.Minute, func() error {
		states, err := f.rayNodes(ctx)
		if err != nil {
			return err
		}
		for host, p := range f.pods {
			if states[p.Status.PodIP] != "ALIVE" {
				return fmt.Errorf("Ray's nodes %v: %s's pod %s is not alive", states, host, p.Status.PodIP)
			}
		}
		t.Logf("Ray's nodes (pod address: state): %v, %s after the cluster was made", states, time.Since(created).Round(100*time.Millisecond))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return f
}

// cordonOtherNodes marks every Node the shared control plane has before
// the fleet joins (other tests' kwok Nodes, where nothing runs, and any
// Node a machine of theirs left) unschedulable until the test ends, so
// that the pods nothing pins (a RayJob's submitter, say) land on the
// fleet's real nodes.
func cordonOtherNodes(t testing.TB, tc *testcluster.Cluster) {
	t.Helper()
	ctx := context.Background()
	nodes, err := tc.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cordon := func(name string, unschedulable bool) error {
		patch := fmt.Appendf(nil, `{"spec":{"unschedulable":%t}}`, unschedulable)
		_, err := tc.Kube.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		return err
	}
	for _, n := range nodes.Items {
		if n.Spec.Unschedulable {
			continue
		}
		if err := cordon(n.Name, true); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("cordon the Node %s: %v", n.Name, err)
		}
		t.Cleanup(func() {
			if err := cordon(n.Name, false); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("uncordon the Node %s: %v", n.Name, err)
			}
		})
	}
}

func (f *rayPodFleet) machines() []*node { return []*node{f.head, f.a, f.b} }

// waitForLinks waits until every machine reports state for its links to
// the other two.
func (f *rayPodFleet) waitForLinks(state api.LinkState) {
	want := linkStates{}
	for _, from := range f.machines() {
		want[from.hostname] = map[string]api.LinkState{}
		for _, to := range f.machines() {
			if to != from {
				want[from.hostname][to.hostname] = state
			}
		}
	}
	f.m.waitForLinks(want, 90*time.Second)
}

// rayNodes is Ray's node list from the head's dashboard: each node's
// address and state (ALIVE wins over an older DEAD entry at the same
// address).
func (f *rayPodFleet) rayNodes(ctx context.Context) (map[string]string, error) {
	nodes, err := raytest.ListNodes(ctx, &http.Client{Timeout: 10 * time.Second}, f.dashboard)
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

// TestRayPodsAcrossTheFleet: KubeRay's head and worker pods run on three
// real nodes (a rayPodFleet) at pod addresses of their machines' pod
// CIDRs, each the image it should run; a job runs a task pinned to each
// and gets back each pod's name; `launcher run` of a small RayJob launch
// brings a second Ray cluster up beside the first and its job succeeds
// with a task on its worker pod; a disconnect of one GPU machine removes
// its pod, Ray marks that node dead, and the worker group's replicas
// follow.
func TestRayPodsAcrossTheFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("real kubelets, containerd and Ray in pods; run make test")
	}
	ctx := context.Background()
	f := startRayPodFleet(t, "ray", 51)
	m, tc, pods := f.m, f.m.tc, f.pods
	for _, n := range f.machines() {
		p := pods[n.hostname]
		ip := netip.MustParseAddr(p.Status.PodIP)
		if !f.podCIDRs[n.hostname].Contains(ip) {
			t.Errorf("pod %s's address %s is not in %s's pod CIDR %s", p.Name, ip, n.hostname, f.podCIDRs[n.hostname])
		}
		want := rayimage.WorkerTag
		if n == f.head {
			want = rayimage.HeadTag
		}
		if p.Spec.Containers[0].Image != want {
			t.Errorf("pod %s runs %s, want %s", p.Name, p.Spec.Containers[0].Image, want)
		}
	}
	dashboard, alive := f.dashboard, f.rayNodes

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

	// The launcher's RayJob on the same fleet: a cluster of its own (its
	// head beside the first one's), a task on its worker, SUCCEEDED.
	f.launchRayJob(t)

	// b is disconnected: its pod goes with its drained Node, Ray marks
	// its node dead, and the pool's group asks for one worker.
	gone := pods[f.b.hostname]
	if status, body := m.api("POST", "/v1/nodes/disconnect", map[string]any{"hostname": f.b.hostname}); status != 200 || body["released"] != true {
		t.Fatalf("disconnect: %d %v", status, body)
	}
	if err := within(2*time.Minute, func() error {
		if _, err := tc.Kube.CoreV1().Pods(m.namespace).Get(ctx, gone.Name, metav1.GetOptions{}); err == nil {
			return fmt.Errorf("pod %s still there", gone.Name)
		}
		states, err := alive(ctx)
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

	// b's link service learns that the master no longer knows it, takes
	// its node away (its pods, its containerd's shims, its cgroups) and
	// ends. Nothing of the other machines goes with it: their pods are
	// the same pods, never restarted, and Ray still lists them alive.
	select {
	case <-f.services[f.b.hostname].exited:
	case <-time.After(3 * time.Minute):
		t.Fatal("ray-b's link service did not end after its disconnect")
	}
	if !strings.Contains(f.services[f.b.hostname].logs(), "node stopped and removed") {
		t.Fatalf("ray-b's link service ended without removing its node:\n%s", f.services[f.b.hostname].logs())
	}
	states, err := alive(ctx)
	if err != nil {
		t.Fatalf("the head's dashboard after ray-b's node went: %v", err)
	}
	for _, n := range []*node{f.head, f.a} {
		before := pods[n.hostname]
		now, err := tc.Kube.CoreV1().Pods(m.namespace).Get(ctx, before.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s's pod after ray-b's node went: %v", n.hostname, err)
		}
		restarts := 0
		for _, c := range now.Status.ContainerStatuses {
			restarts += int(c.RestartCount)
		}
		if now.UID != before.UID || now.Status.PodIP != before.Status.PodIP || restarts > 0 {
			t.Errorf("%s's pod %s after ray-b's node went: uid %s→%s, address %s→%s, %d restarts", n.hostname, before.Name, before.UID, now.UID, before.Status.PodIP, now.Status.PodIP, restarts)
		}
		if states[before.Status.PodIP] != "ALIVE" {
			t.Errorf("Ray's nodes %v: %s's pod %s is not alive after ray-b's node went", states, n.hostname, before.Status.PodIP)
		}
	}
}

// launchRecipe and launchInfra are a small RayJob launch on the images
// the machines imported: its head on the CPU machine beside the fleet's
// own Ray head, one CPU worker that runs a task. Each machine has two
// CPUs and each Ray pod already there asks for one, so the new pods ask
// for little (the head and the worker a quarter of a CPU, KubeRay's
// submitter half) and may use more (limits of two). The machines share
// two cores with the control plane and every other test: the head's
// readiness probe may fail for a minute under that load, and KubeRay's
// submitter (K8sJobMode, its default) gives up after three tries, so the
// launch asks for more, as a user of a busy cluster would.
const launchRecipe = `name: hello-pods
entrypoint: >-
  python -c "import ray, socket; ray.init();
  where = ray.remote(lambda: socket.gethostname());
  print('RAN ON', ray.get(where.options(resources={'dockyard_fleet_trainer': 1}).remote()))"
fleets:
  trainer:
    replicas: 1
    gpusPerNode: 0
    cpu: 250m
    memory: 2Gi
inference:
  backend: vllm
`

const launchInfra = `namespace: %[1]s
images:
  vllm: %[2]s
launch:
  mode: rayjob
  ttlSecondsAfterFinished: 0
  submitterConfig:
    backoffLimit: 8
kuberay:
  rayVersion: %[3]q
  spec:
    headGroupSpec:
      rayStartParams:
        num-cpus: "1"
      template:
        spec:
          nodeSelector:
            kubernetes.io/hostname: %[4]s
          containers:
          - name: ray-head
            resources:
              requests: {cpu: 250m, memory: 1Gi}
              limits: {cpu: "2", memory: 2Gi}
    workerGroupSpecs:
    - groupName: trainer
      rayStartParams:
        num-cpus: "1"
      template:
        spec:
          containers:
          - name: ray-worker
            resources:
              limits: {cpu: "2"}
`

// launchRayJob runs `launcher run` of launchRecipe on the fleet, as a user
// does with the master's kubeconfig, and waits for its RayJob to
// succeed: the submitter's log (the job's own output) names the worker
// pod the task ran on.
func (f *rayPodFleet) launchRayJob(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	recipe, infra := filepath.Join(dir, "hello.recipe.yaml"), filepath.Join(dir, "hello.infra.yaml")
	if err := os.WriteFile(recipe, []byte(launchRecipe), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(infra, []byte(fmt.Sprintf(launchInfra, f.m.namespace, rayimage.HeadTag, rayimage.RayVersion, f.head.hostname)), 0o644); err != nil {
		t.Fatal(err)
	}
	submitterLogs := func() string {
		var b strings.Builder
		all, _ := f.m.tc.Kube.CoreV1().Pods(f.m.namespace).List(ctx, metav1.ListOptions{})
		for _, p := range all.Items {
			if strings.HasPrefix(p.Name, "hello-pods") {
				fmt.Fprintf(&b, "pod %s on %q: %s %v %v\n", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.Conditions, p.Status.ContainerStatuses)
			}
		}
		pods, _ := f.m.tc.Kube.CoreV1().Pods(f.m.namespace).List(ctx, metav1.ListOptions{LabelSelector: "job-name=hello-pods"})
		for _, p := range pods.Items {
			logs, err := f.m.tc.Kube.CoreV1().Pods(f.m.namespace).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
			fmt.Fprintf(&b, "submitter %s on %s, %s (%v):\n%s\n", p.Name, p.Spec.NodeName, p.Status.Phase, err, tail(string(logs), 2000))
		}
		return b.String()
	}
	began := time.Now()
	cmd := exec.Command(builtLauncher(t), "--kubeconfig", f.m.tc.KubeconfigPath, "run", recipe, infra, "--timeout", "4m")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "RayJob "+f.m.namespace+"/hello-pods is running") {
		t.Fatalf("launcher run: %v\n%s\n%s", err, out, submitterLogs())
	}
	t.Logf("launcher run: %s", strings.TrimSpace(string(out)))
	var job *rayv1.RayJob
	if err := within(4*time.Minute, func() error {
		job, err = f.m.tc.Ray.RayV1().RayJobs(f.m.namespace).Get(ctx, "hello-pods", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if job.Status.JobDeploymentStatus == rayv1.JobDeploymentStatusFailed {
			return stop(fmt.Errorf("RayJob hello-pods failed: job %q: %s", job.Status.JobStatus, job.Status.Message))
		}
		if job.Status.JobStatus != rayv1.JobStatusSucceeded {
			return fmt.Errorf("RayJob hello-pods: deployment %s, job %q: %s", job.Status.JobDeploymentStatus, job.Status.JobStatus, job.Status.Message)
		}
		return nil
	}); err != nil {
		t.Fatalf("%v\n%s", err, submitterLogs())
	}
	// The submitter follows the job's log until it ends: its log holds
	// the job's output (a moment after Ray reports the job done).
	worker := "RAN ON " + job.Status.RayClusterName + "-trainer-worker-"
	var logs []byte
	if err := within(time.Minute, func() error {
		submitters, err := f.m.tc.Kube.CoreV1().Pods(f.m.namespace).List(ctx, metav1.ListOptions{LabelSelector: "job-name=hello-pods"})
		if err != nil {
			return err
		}
		for _, p := range submitters.Items {
			if p.Status.Phase == corev1.PodPending {
				continue
			}
			if logs, err = f.m.tc.Kube.CoreV1().Pods(f.m.namespace).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx); err == nil && strings.Contains(string(logs), worker) {
				return nil
			}
		}
		return fmt.Errorf("no submitter's log has %q (the task on the worker pod)", worker)
	}); err != nil {
		t.Fatalf("%v\n%s", err, submitterLogs())
	}
	line := string(logs)[strings.Index(string(logs), "RAN ON "):]
	line, _, _ = strings.Cut(line, "\n")
	t.Logf("the RayJob SUCCEEDED %s after launcher run began, on cluster %s: %s", time.Since(began).Round(100*time.Millisecond), job.Status.RayClusterName, line)
}

// launcherBinary is the launcher, built once per test binary.
var launcherBinary struct {
	once sync.Once
	path string
	err  error
}

func builtLauncher(t testing.TB) string {
	t.Helper()
	launcherBinary.once.Do(func() {
		dir, err := os.MkdirTemp("", "gridweave-launcher-")
		if err != nil {
			launcherBinary.err = err
			return
		}
		launcherBinary.path = filepath.Join(dir, "launcher")
		if out, err := exec.Command("go", "build", "-o", launcherBinary.path, "../launcher").CombinedOutput(); err != nil {
			launcherBinary.err = fmt.Errorf("go build ../launcher: %v: %s", err, out)
		}
	})
	if launcherBinary.err != nil {
		t.Fatal(launcherBinary.err)
	}
	return launcherBinary.path
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
