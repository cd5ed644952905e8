package image

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// BuildStatic builds the server (./examples/server of the module in
// moduleDir) into out as one static binary: cgo SQLite linked in with
// glibc statically (osusergo and netgo keep glibc's NSS out), no paths or
// build ids of this machine, so the same source gives the same bytes.
func BuildStatic(ctx context.Context, moduleDir, out, version string) error {
	args := []string{"build", "-trimpath", "-buildvcs=false",
		"-tags", "osusergo netgo sqlite_omit_load_extension",
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
