package rayctl_test

import (
	"context"
	"fmt"

	"gridweave.dev/rayctl"
	"gridweave.dev/rayctl/rayctltest"
)

// The Client on fake clientsets: add a GPU worker group pinned to a node,
// surviving two conflicting writers on the way.
func Example() {
	rc, _ := rayctl.ClusterSpec{Name: "demo", Namespace: "ml"}.Build()
	f, _ := rayctltest.NewFakes("ml", rc)
	rayctltest.InjectConflicts(&f.Ray.Fake, "rayclusters", 2)

	out, err := f.Client.AddWorkerGroup(context.Background(), "", "demo", rayctl.WorkerGroup{
		Name: "a100", NodeHostname: "gpu-box-1", GPUs: 8,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	g := out.Spec.WorkerGroupSpecs[0]
	limit := g.Template.Spec.Containers[0].Resources.Limits["nvidia.com/gpu"]
	fmt.Println(g.GroupName, g.Template.Spec.NodeSelector["kubernetes.io/hostname"], limit.String())
	// Output: a100 gpu-box-1 8
}
