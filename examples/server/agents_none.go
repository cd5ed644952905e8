//go:build !embedagents

package main

import "io/fs"

// embeddedAgents is nil in a plain go build: the agents come from
// AGENT_DIR, or the server answers their route with 404 naming
// make server-static, which embeds them.
func embeddedAgents() fs.FS { return nil }
