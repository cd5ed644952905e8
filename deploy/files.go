package deploy

import "embed"

// Files holds kubernetes/*.yaml, kubernetes/ha/*.yaml,
// kubernetes/kubelet/*.yaml, kubernetes/gpu-metrics/*.yaml and systemd/*,
// as shipped.
//
//go:embed kubernetes/*.yaml kubernetes/ha/*.yaml kubernetes/kubelet/*.yaml kubernetes/gpu-metrics/*.yaml systemd/*
var Files embed.FS
