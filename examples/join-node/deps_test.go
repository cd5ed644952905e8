package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestAgentLinksNoMasterCode: the agent that runs on every GPU machine
// links none of the master's weight (Kubernetes and KubeRay clients,
// SQLite, the server) and no test code; what it shares with the master is
// the wire types of gridweave/api. Of Kubernetes it links the container
// runtime interface alone (k8s.io/cri-api: the kubelet join mode removes
// its pods through containerd's CRI when it leaves).
func TestAgentLinksNoMasterCode(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	for _, pkg := range deps {
		switch {
		case strings.HasPrefix(pkg, "k8s.io/cri-api/"):
		case strings.HasPrefix(pkg, "k8s.io/"), strings.HasPrefix(pkg, "github.com/ray-project/"),
			strings.HasPrefix(pkg, "github.com/mattn/go-sqlite3"), pkg == "testing",
			pkg == "gridweave.dev/gridweave", strings.HasPrefix(pkg, "gridweave.dev/gridweave/fleet"),
			strings.HasPrefix(pkg, "gridweave.dev/rayctl"), strings.HasPrefix(pkg, "gridweave.dev/internal/testcluster"):
			t.Errorf("the agent links %s", pkg)
		}
	}
	if !strings.Contains(string(out), "gridweave.dev/gridweave/api\n") {
		t.Error("the agent does not use gridweave/api for the wire format")
	}
}
