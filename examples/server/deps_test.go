package main

import (
	"strings"
	"testing"

	"gridweave.dev/internal/linkcheck"
)

// TestServerLinksNoTestCode: the server links neither the testing package
// nor a test helper package of this module (the embedded in-memory cluster
// is rayctl/raymem, not rayctltest), nor KubeRay's operator packages that
// link testing: rayctl carries the operator's validation rules itself
// (rayctl/operatorrules.go) and rayctl/operatorbuild its builders, both
// differential-tested against KubeRay's.
func TestServerLinksNoTestCode(t *testing.T) {
	linkcheck.NoTestCode(t, ".", "server")
}

// TestServerExecsNothingOfItsOwn: no package of this module that the
// server links starts a program (os/exec, syscall.Exec): the static
// binary runs in an image that holds nothing else, so routes, the
// WireGuard device and everything else go through system calls
// (netlink, wgctrl). Programs a kubeconfig names for credentials are the
// operator's (client-go's exec plugin), not ours.
func TestServerExecsNothingOfItsOwn(t *testing.T) {
	for pkg, imports := range linkcheck.Imports(t, ".") {
		if !strings.HasPrefix(pkg, "gridweave.dev/") {
			continue
		}
		for _, imp := range imports {
			if imp == "os/exec" {
				t.Errorf("%s, linked into the server, imports os/exec", pkg)
			}
		}
	}
}
