//go:build embedagents

package main

import (
	"embed"
	"io/fs"
)

//go:embed agents
var agentFiles embed.FS

// embeddedAgents are the join agents make server-static builds into the
// binary (agents/join-node-<os>-<arch>).
func embeddedAgents() fs.FS {
	sub, err := fs.Sub(agentFiles, "agents")
	if err != nil {
		panic(err) // the pattern above names the directory
	}
	return sub
}
