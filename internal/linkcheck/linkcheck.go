package linkcheck

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// Imports are the packages the main package in dir links, each with the
// packages it imports.
func Imports(t testing.TB, dir string) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}\t{{join .Imports \" \"}}", ".")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	graph := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, "\t")
		graph[pkg] = strings.Fields(imports)
	}
	if len(graph) < 100 {
		t.Fatalf("go list printed %d packages: not a binary's dependency graph", len(graph))
	}
	return graph
}

// kubeRayWithTesting are the KubeRay operator's packages that link the
// testing package (its feature gates have test helpers, its builders a
// test file that is not one): package rayctl/operatorbuild ports what is
// needed of them.
var kubeRayWithTesting = []string{
	"github.com/ray-project/kuberay/ray-operator/controllers/ray/utils",
	"github.com/ray-project/kuberay/ray-operator/controllers/ray/common",
	"github.com/ray-project/kuberay/ray-operator/pkg/features",
}

// NoTestCode fails t when the binary in dir (named binary in messages)
// links the testing package, a test helper package of this module, or a
// KubeRay package that links testing.
func NoTestCode(t *testing.T, dir, binary string) {
	t.Helper()
	for pkg, imports := range Imports(t, dir) {
		if strings.HasPrefix(pkg, "gridweave.dev/") && (strings.HasSuffix(pkg, "test") || strings.Contains(pkg, "/internal/testcluster")) {
			t.Errorf("the %s links the test helper package %s", binary, pkg)
		}
		if pkg == "testing" || strings.HasPrefix(pkg, "testing/") {
			t.Errorf("the %s links %s", binary, pkg)
		}
		for _, imp := range imports {
			if imp == "testing" || slices.Contains(kubeRayWithTesting, imp) {
				t.Errorf("%s, linked into the %s, imports %s", pkg, binary, imp)
			}
		}
	}
}
