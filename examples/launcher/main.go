// Command launcher turns a recipe (what to run) and an infra spec (where)
// into Kubernetes objects, validates and lints any Kubernetes YAML the
// way the API server and the KubeRay operator would judge it, and applies
// and follows launches on a cluster. The commands are
// gridweave.dev/rayctl/launch/launchcli's (its documentation lists them);
// `launcher help` lists them too.
//
// Exit status: 0 fine (warnings allowed), 1 an error was found (or a
// doctor check failed), 2 the command could not run, 130 interrupted
// while waiting.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	// The short commands run at the short-command pace (its doc).
	_ "gridweave.dev/internal/gcpace"
	"gridweave.dev/rayctl/launch/launchcli"
)

func main() {
	// Ctrl-C ends a wait, never what was applied: the launch keeps running.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := launchcli.Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
