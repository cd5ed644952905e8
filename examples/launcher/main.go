// Command launcher turns a recipe (what to run) and an infra spec (where)
// into Kubernetes objects, and validates and lints any Kubernetes YAML the
// way the API server and the KubeRay operator would judge it. The offline
// commands never contact a cluster:
//
//	launcher check RECIPE INFRA      validate + lint the pair; show the resources Ray will see
//	launcher render RECIPE INFRA     manifests in apply order (stdout, or -o DIR)
//	launcher lint PATH... | -        validate + lint files, directories or stdin (-o json|sarif|junit|github)
//	launcher chart render VALUES     the RayService chart's objects
//	launcher schema recipe|infra|chart-values   the JSON Schema of a spec file, for editors
//	launcher lsp                     a language server over stdio: findings as diagnostics while editing
//
// The live commands use the kubeconfig (--kubeconfig, --context, -n):
//
//	launcher run RECIPE INFRA        apply and start the launch; wait, saying why pods wait
//	launcher cluster up RECIPE INFRA the long-lived RayCluster with its sandbox
//	launcher cluster down NAME       delete what up (or run) applied, and wait until it is gone
//	launcher status NAME             pods per fleet, the RayJob's state, the dashboard
//	launcher logs NAME [TARGET]      head, a worker group, submitter or sandbox (--follow ...)
//	launcher job list|logs|stop      the Ray dashboard's jobs, through the API server's proxy
//	launcher dev RECIPE INFRA        cluster up once; then send the local code (what changed) and submit
//	launcher doctor RECIPE INFRA     what the launch needs from the cluster, with fixes
//
// Exit status: 0 fine (warnings allowed), 1 an error was found (or a
// doctor check failed), 2 the command could not run, 130 interrupted
// while waiting. The logic lives in gridweave.dev/manifest and
// gridweave.dev/rayctl/launch.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// Ctrl-C ends a wait, never what was applied: the launch keeps running.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
