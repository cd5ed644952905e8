package scrapetargets_test

import (
	"context"
	"fmt"
	"log"
	"net/netip"
	"os"
	"path/filepath"

	"gridweave.dev/gridweave/scrapetargets"
)

func ExampleDir() {
	tmp, err := os.MkdirTemp("", "dcgm-targets-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)

	ctx := context.Background()
	targets, err := scrapetargets.New(filepath.Join(tmp, "dcgm-targets"))
	if err != nil {
		log.Fatal(err)
	}
	// A GPU node registered: write its target.
	err = targets.Write(ctx, scrapetargets.Target{
		Hostname: "gpu-node-1",
		VPNIP:    netip.MustParseAddr("198.18.0.7"),
		GPUModel: "NVIDIA H100 80GB HBM3",
		GPUCount: 8,
	})
	if err != nil {
		log.Fatal(err)
	}
	content, err := os.ReadFile(filepath.Join(targets.Path(), "gpu-node-1.json"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(string(content))

	// After a restart, List tells a reconcile what is there.
	listed, err := targets.List()
	if err != nil {
		log.Fatal(err)
	}
	for _, t := range listed {
		fmt.Println(t.Hostname, t.Address(), t.GPUCount, "x", t.GPUModel)
	}

	// The node disconnected: remove its target (again is fine).
	if err := targets.Remove("gpu-node-1"); err != nil {
		log.Fatal(err)
	}
	if err := targets.Remove("gpu-node-1"); err != nil {
		log.Fatal(err)
	}
	listed, err = targets.List()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(listed), "targets left")
	// Output:
	// [
	//   {
	//     "targets": [
	//       "198.18.0.7:9400"
	//     ],
	//     "labels": {
	//       "gpu_count": "8",
	//       "gpu_model": "NVIDIA H100 80GB HBM3",
	//       "hostname": "gpu-node-1",
	//       "node": "gpu-node-1"
	//     }
	//   }
	// ]
	// gpu-node-1 198.18.0.7:9400 8 x NVIDIA H100 80GB HBM3
	// 0 targets left
}
