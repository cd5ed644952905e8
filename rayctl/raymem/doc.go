// Package raymem is an in-memory Kubernetes with KubeRay's kinds: client-go's
// and KubeRay's fake clientsets, made to behave as the API server does where
// rayctl relies on it. The control-plane server runs on it when it has no
// cluster (make run: the API answers, nothing is scheduled), and package
// rayctltest builds its test fakes on it. It links no testing code.
package raymem
