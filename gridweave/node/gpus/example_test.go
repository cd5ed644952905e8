package gpus_test

import (
	"context"
	"fmt"
	"os/exec"

	"gridweave.dev/gridweave/node/gpus"
)

// A machine with nvidia-smi and two GPUs, faked so the example runs
// anywhere; a real agent passes nil options.
func ExampleDetect() {
	opts := &gpus.Options{
		LookPath: func(file string) (string, error) {
			if file == "nvidia-smi" {
				return "/usr/bin/nvidia-smi", nil
			}
			return "", exec.ErrNotFound
		},
		Run: func(ctx context.Context, name string, args ...string) ([]byte, error) {
			return []byte("0, NVIDIA H100 80GB HBM3, 81559, GPU-3f1c2b7e-8a41-4c1e-9d52-6b0e7a9f1c20, 550.54.15\n" +
				"1, NVIDIA H100 80GB HBM3, 81559, GPU-9a2d4c61-0b7f-4e3a-8c15-2f6d8e4a7b31, 550.54.15\n"), nil
		},
	}
	found, err := gpus.Detect(context.Background(), opts)
	if err != nil {
		fmt.Println("detect:", err)
		return
	}
	for _, g := range found {
		fmt.Printf("%d %s %s %d MiB (driver %s)\n", g.Index, g.Vendor, g.Name, g.MemoryMiB, g.Driver)
	}
	// Output:
	// 0 nvidia NVIDIA H100 80GB HBM3 81559 MiB (driver 550.54.15)
	// 1 nvidia NVIDIA H100 80GB HBM3 81559 MiB (driver 550.54.15)
}
