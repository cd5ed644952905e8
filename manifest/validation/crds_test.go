package validation_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	sigsyaml "sigs.k8s.io/yaml"

	"gridweave.dev/manifest/validation"
)

// TestEmbeddedCRDsMatchModule keeps crds/ identical to the CRDs of
// the KubeRay and Gateway API module versions in go.mod (regenerate with
// go generate).
func TestEmbeddedCRDsMatchModule(t *testing.T) {
	for _, c := range []struct{ module, dir, glob string }{
		{"github.com/ray-project/kuberay/ray-operator", "config/crd/bases", "ray.io_*.yaml"},
		{"sigs.k8s.io/gateway-api", "config/crd/standard", "gateway.networking.k8s.io_*.yaml"},
	} {
		out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", c.module).Output()
		if err != nil {
			t.Fatalf("locate %s: %v", c.module, err)
		}
		files, _ := filepath.Glob(filepath.Join(strings.TrimSpace(string(out)), c.dir, c.glob))
		embedded, _ := filepath.Glob(filepath.Join("crds", c.glob))
		if len(files) < 4 || len(files) != len(embedded) {
			t.Fatalf("%s: %d CRDs in the module, %d embedded", c.module, len(files), len(embedded))
		}
		for _, f := range files {
			want, _ := os.ReadFile(f)
			got, err := os.ReadFile(filepath.Join("crds", filepath.Base(f)))
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("crds/%s differs from the module's (%v); run go generate ./manifest/validation/", filepath.Base(f), err)
			}
		}
	}
}

// TestEveryEmbeddedCRDIsFound: each embedded file is where crdFor looks
// for its kind.
func TestEveryEmbeddedCRDIsFound(t *testing.T) {
	files, _ := filepath.Glob("crds/*.yaml")
	v := validation.NewValidator()
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd struct {
			Spec struct {
				Group    string
				Names    struct{ Kind string }
				Versions []struct {
					Name   string
					Served bool
				}
			}
		}
		if err := sigsyaml.Unmarshal(data, &crd); err != nil {
			t.Fatal(err)
		}
		for _, ver := range crd.Spec.Versions {
			if !ver.Served {
				continue
			}
			u := &unstructured.Unstructured{}
			u.SetAPIVersion(crd.Spec.Group + "/" + ver.Name)
			u.SetKind(crd.Spec.Names.Kind)
			u.SetName("x")
			for _, finding := range v.Validate(u) {
				if finding.ID == "type" || finding.ID == "internal" {
					t.Errorf("%s %s/%s: %v", f, crd.Spec.Group, ver.Name, finding)
				}
			}
		}
	}
}

// TestEmbeddedGridweaveCRDsMatch: the embedded copies of our own CRDs are
// the generated ones.
func TestEmbeddedGridweaveCRDsMatch(t *testing.T) {
	files, _ := filepath.Glob("../../gridweave/crd/bases/gridweave.dev_*.yaml")
	if len(files) != 2 {
		t.Fatalf("%d generated CRDs of ours, want 2", len(files))
	}
	for _, f := range files {
		want, _ := os.ReadFile(f)
		got, err := os.ReadFile(filepath.Join("crds", filepath.Base(f)))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("crds/%s differs from gridweave/crd/bases (%v); run go generate ./manifest/validation/", filepath.Base(f), err)
		}
	}
}
