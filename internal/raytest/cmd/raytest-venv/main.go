// Command raytest-venv creates (or finds in the cache) the Python virtual
// environment with Ray that the real-Ray tests use, and prints its
// directory. `make ray-venv` runs it; with -clean it removes every cached
// environment instead.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"

	"gridweave.dev/internal/raytest"
)

func main() {
	clean := flag.Bool("clean", false, "remove the cached environments instead of creating one")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *clean); err != nil {
		fmt.Fprintln(os.Stderr, "raytest-venv:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, clean bool) error {
	root, err := raytest.DefaultCacheRoot()
	if err != nil {
		return err
	}
	if clean {
		fmt.Println("removing", root)
		return os.RemoveAll(root)
	}
	venv, err := raytest.EnsureVenv(ctx, root, os.Stderr)
	if err != nil {
		return err
	}
	fmt.Println(venv.Dir)
	return nil
}
