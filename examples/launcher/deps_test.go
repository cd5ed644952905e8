package main

import (
	"testing"

	"gridweave.dev/internal/linkcheck"
)

// TestLauncherLinksNoTestCode: the launcher links neither the testing
// package nor a test helper package of this module. Its lint builds what
// the KubeRay operator builds with rayctl/operatorbuild, not with the
// operator's own packages, which link testing.
func TestLauncherLinksNoTestCode(t *testing.T) {
	linkcheck.NoTestCode(t, ".", "launcher")
}
