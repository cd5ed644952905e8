// Package crd ships Gridweave's own custom resources, GridweaveJob and
// GridweaveEndpoint (group gridweave.dev, version v1alpha1: the Go types
// in v1alpha1): their CRD YAML, generated from the types by controller-gen
// (`go generate ./gridweave/crd/...`) into bases/, embedded here, and
// Install, which creates or updates them on an API server and waits until
// they are served.
package crd
