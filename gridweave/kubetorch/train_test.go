package kubetorch_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	rayfake "github.com/ray-project/kuberay/ray-operator/pkg/client/clientset/versioned/fake"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"gridweave.dev/gridweave/api"
	"gridweave.dev/gridweave/crd/v1alpha1"
	"gridweave.dev/gridweave/kubetorch"
	"gridweave.dev/rayctl"
	"gridweave.dev/rayctl/dashboard"
	"gridweave.dev/rayctl/rayctltest"
)

// TestATrainingItCannotRecordIsStopped: Ray took the training's job, and
// the API server refused its GridweaveJob: the answer is the error and
// the Ray job is stopped, not left running where no jobs list shows it.
func TestATrainingItCannotRecordIsStopped(t *testing.T) {
	ctx := context.Background()
	const ns = "training"
	d := rayctltest.NewDashboard(t, "")
	bundles := &kubetorch.Store{Dir: t.TempDir()}
	b, err := bundles.Put(bytes.NewReader(tarGz(t, entry{name: "train.py", body: "print(1)"})), kubetorch.FormatTarGz)
	if err != nil {
		t.Fatal(err)
	}
	//lint:ignore SA1019 NewClientset's field management needs KubeRay's OpenAPI models, which its fake lacks
	rays := rayfake.NewSimpleClientset(&rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: ns}})
	ray, err := rayctl.New(k8sfake.NewClientset(), rays, &rayctl.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	gvr := v1alpha1.GroupVersion.WithResource(v1alpha1.JobResource)
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(k8sruntime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "GridweaveJobList"})
	dyn.PrependReactor("create", v1alpha1.JobResource, func(k8stesting.Action) (bool, k8sruntime.Object, error) {
		return true, nil, errors.New("admission webhook denied the request")
	})
	tr := &kubetorch.Trainer{Bundles: bundles, Ray: ray, Namespace: ns, DashboardURL: d.URL, Jobs: kubetorch.NewJobs(dyn, ns)}
	_, err = tr.Train(ctx, api.TrainRequest{Cluster: "train", Bundle: b.ID, Command: "python train.py", Owner: "alice", Nodes: 2, GPUsPerNode: 1})
	if err == nil {
		t.Fatal("Train answered no error although its job could not be recorded")
	}
	c, err := dashboard.New(d.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := c.ListJobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 || jobs[0].Status != "STOPPED" {
		t.Errorf("Ray's jobs after the refused record: %+v; want the one job, STOPPED", jobs)
	}
}
