package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestServerLinksNoTestCode: no package of this module that the server
// links imports the testing package or a test helper package (the
// embedded in-memory cluster is rayctl/raymem, not rayctltest).
//
// The server still links the standard testing package through KubeRay's
// own ray-operator/pkg/features (it imports testing for a test helper),
// which rayctl reaches through KubeRay's spec validation; the test pins
// that this is the only way in, so no new path appears unnoticed.
func TestServerLinksNoTestCode(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}\t{{join .Imports \" \"}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	importers := map[string][]string{} // package -> the packages that import it
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, "\t")
		for _, imp := range strings.Fields(imports) {
			importers[imp] = append(importers[imp], pkg)
		}
		if strings.HasPrefix(pkg, "gridweave.dev/") && (strings.HasSuffix(pkg, "test") || strings.Contains(pkg, "/internal/testcluster")) {
			t.Errorf("the server links the test helper package %s", pkg)
		}
	}
	for _, pkg := range importers["testing"] {
		if strings.HasPrefix(pkg, "gridweave.dev/") {
			t.Errorf("%s, linked into the server, imports testing", pkg)
		}
		if pkg != "k8s.io/component-base/featuregate/testing" && pkg != "github.com/ray-project/kuberay/ray-operator/pkg/features" {
			t.Errorf("a new path links testing into the server: %s imports it", pkg)
		}
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
