package deploy

import "embed"

// Files holds kubernetes/*.yaml, kubernetes/ha/*.yaml,
// kubernetes/kubelet/*.yaml and systemd/*, as shipped.
//
//go:embed kubernetes/*.yaml kubernetes/ha/*.yaml kubernetes/kubelet/*.yaml systemd/*
var Files embed.FS
