package manifest_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestEmbeddedCRDsMatchModule keeps manifest/crds identical to the CRDs of
// the KubeRay module version in go.mod (regenerate with go generate).
func TestEmbeddedCRDsMatchModule(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/ray-project/kuberay/ray-operator").Output()
	if err != nil {
		t.Fatalf("locate the KubeRay module: %v", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "bases")
	files, _ := filepath.Glob(filepath.Join(dir, "ray.io_*.yaml"))
	if len(files) != 4 {
		t.Fatalf("found %d CRDs in %s", len(files), dir)
	}
	for _, f := range files {
		want, _ := os.ReadFile(f)
		got, err := os.ReadFile(filepath.Join("crds", filepath.Base(f)))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("crds/%s differs from the module's (%v); run go generate ./manifest/", filepath.Base(f), err)
		}
	}
}
