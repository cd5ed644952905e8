package image

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// AgentPlatforms are the machines the server carries a join agent for.
var AgentPlatforms = []struct{ OS, Arch string }{{"linux", "amd64"}, {"linux", "arm64"}}

// agentsDir is where BuildStatic puts the agents the server embeds
// (examples/server/agents_embed.go), inside the module; it is not kept in
// the repository.
const agentsDir = "examples/server/agents"

// BuildStatic builds the server (./examples/server of the module in
// moduleDir) into out as one static binary: cgo SQLite linked in with
// glibc statically (osusergo and netgo keep glibc's NSS out), no paths or
// build ids of this machine, so the same source gives the same bytes. The
// join agents for AgentPlatforms (cgo-free, of the same version) are
// built first and embedded (build tag embedagents), so the binary serves
// them wherever it runs.
func BuildStatic(ctx context.Context, moduleDir, out, version string) error {
	agents := filepath.Join(moduleDir, agentsDir)
	// One build at a time uses the directory (go test runs packages that
	// build the server side by side).
	lock, err := os.OpenFile(agents+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if err := os.MkdirAll(agents, 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(agents)
	for _, p := range AgentPlatforms {
		args := []string{"build", "-trimpath", "-buildvcs=false", "-ldflags", "-s -w -buildid= -X main.version=" + version,
			"-o", filepath.Join(agents, "join-node-"+p.OS+"-"+p.Arch), "./examples/join-node"}
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = moduleDir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Arch)
		if output, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("the %s/%s agent: go %s: %w: %s", p.OS, p.Arch, strings.Join(args, " "), err, output)
		}
	}
	args := []string{"build", "-trimpath", "-buildvcs=false",
		"-tags", "osusergo netgo sqlite_omit_load_extension embedagents",
		"-ldflags", "-s -w -buildid= -linkmode external -extldflags -static -X main.builtVersion=" + version,
		"-o", out, "./examples/server"}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = moduleDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, output)
	}
	return nil
}
