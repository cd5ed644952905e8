// Package rayctltest helps test code built on rayctl without a cluster:
// fake KubeRay and Kubernetes clientsets (the KubeRay scheme registered),
// conflict injection (the next N writes of a resource fail with 409, then
// succeed), marking RayClusters ready (no operator runs against fakes),
// and a fake Ray dashboard that answers with Ray's documented shapes.
// Real-component tests use internal/testcluster instead.
package rayctltest
