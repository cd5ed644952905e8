// Package clusterapi holds the wire types of the cluster routes
// (/v1/kuberay/clusters/...) whose bodies carry KubeRay's own Go types
// (WorkerGroupSpec, rayctl's views of workers and groups). They are apart
// from package api so that the node agent, which imports api, links no
// Kubernetes or KubeRay code. A whole RayCluster travels as KubeRay's
// rayv1.RayCluster.
package clusterapi
