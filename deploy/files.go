package deploy

import "embed"

// Files holds kubernetes/*.yaml and systemd/*, as shipped.
//
//go:embed kubernetes/*.yaml systemd/*
var Files embed.FS
