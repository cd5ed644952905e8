package deploy

import "embed"

// Files holds kubernetes/*.yaml, kubernetes/ha/*.yaml and systemd/*, as
// shipped.
//
//go:embed kubernetes/*.yaml kubernetes/ha/*.yaml systemd/*
var Files embed.FS
