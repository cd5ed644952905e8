// Package launchcli is the launcher's command line: a recipe (what to
// run) and an infra spec (where) turned into Kubernetes objects, any
// Kubernetes YAML validated and linted the way the API server and the
// KubeRay operator would judge it, and launches applied and followed on a
// cluster. Run is the whole program (examples/launcher's main calls it);
// New is the command tree, for a program that embeds the launcher's
// commands beside its own.
//
// The offline commands never contact a cluster:
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
// The commands are thin over gridweave.dev/manifest (specs, rendering,
// the chart), gridweave.dev/manifest/validation (validation, lint and its
// report formats) and gridweave.dev/rayctl/launch (the live half).
package launchcli
