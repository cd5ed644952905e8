// Command launcher turns a recipe (what to run) and an infra spec (where)
// into Kubernetes objects, and validates and lints any Kubernetes YAML the
// way the API server and the KubeRay operator would judge it. The offline
// commands here never contact a cluster:
//
//	launcher check RECIPE INFRA      validate + lint the pair; show the resources Ray will see
//	launcher render RECIPE INFRA     manifests in apply order (stdout, or -o DIR)
//	launcher lint PATH... | -        validate + lint files, directories or stdin (-o json)
//	launcher chart render VALUES     the RayService chart's objects
//
// Exit status: 0 fine (warnings allowed), 1 an error was found, 2 the
// command could not run. The logic lives in gridweave.dev/manifest.
package main

import (
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
