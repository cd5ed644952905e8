package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestServerLinksNoTestCode: the server links neither the testing package
// nor a test helper package of this module (the embedded in-memory cluster
// is rayctl/raymem, not rayctltest). KubeRay's controllers/ray/utils is
// kept out too: it links the operator's feature gates and through them
// testing, so rayctl carries the operator's validation rules itself
// (rayctl/operatorrules.go, differential-tested against KubeRay's).
func TestServerLinksNoTestCode(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}\t{{join .Imports \" \"}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	packages := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, "\t")
		packages++
		if strings.HasPrefix(pkg, "gridweave.dev/") && (strings.HasSuffix(pkg, "test") || strings.Contains(pkg, "/internal/testcluster")) {
			t.Errorf("the server links the test helper package %s", pkg)
		}
		if pkg == "testing" || strings.HasPrefix(pkg, "testing/") {
			t.Errorf("the server links %s", pkg)
		}
		for _, imp := range strings.Fields(imports) {
			if imp == "testing" || imp == "github.com/ray-project/kuberay/ray-operator/controllers/ray/utils" {
				t.Errorf("%s, linked into the server, imports %s", pkg, imp)
			}
		}
	}
	if packages < 100 {
		t.Fatalf("go list printed %d packages: not the server's dependency graph", packages)
	}
}

// TestServerExecsNothingOfItsOwn: no package of this module that the
// server links starts a program (os/exec, syscall.Exec): the static
// binary runs in an image that holds nothing else, so routes, the
// WireGuard device and everything else go through system calls
// (netlink, wgctrl). Programs a kubeconfig names for credentials are the
// operator's (client-go's exec plugin), not ours.
func TestServerExecsNothingOfItsOwn(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}\t{{join .Imports \" \"}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, "\t")
		if !strings.HasPrefix(pkg, "gridweave.dev/") {
			continue
		}
		for _, imp := range strings.Fields(imports) {
			if imp == "os/exec" {
				t.Errorf("%s, linked into the server, imports os/exec", pkg)
			}
		}
	}
}
