package main

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestREADMEWalkthrough runs the README's curl walk of the join flow, as
// written, against this binary's wiring in dev mode, so it cannot rot.
func TestREADMEWalkthrough(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq", "base64"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the walkthrough needs %s (.ci/run installs it): %v", tool, err)
		}
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("(?s)<!-- walkthrough: [^>]*-->\n```sh\n(.*?)```").FindSubmatch(readme)
	if block == nil {
		t.Fatal("README.md has no walkthrough block")
	}
	s := start(t, map[string]string{"KUBERAY_DB": t.TempDir() + "/kuberay.db", "WG_INTERFACE": "none"}, "--dev")
	token := regexp.MustCompile(`admin token of this run is ([0-9a-f]+)`).FindStringSubmatch(s.stdout.String())
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", string(block[1]))
	cmd.Env = append(os.Environ(), "BASE="+s.url, "ADMIN_TOKEN="+token[1])
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the walkthrough failed: %v\n%s\nserver log:\n%s", err, out, s.stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	want := []string{`"gpu-nvidia-nvidia-h100-80gb-hbm3-x1"`, "gpu-box-1 10.100.0.2 registered", `gridweave-cluster ["gpu-nvidia-nvidia-h100-80gb-hbm3-x1"]`, "true"}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("the walkthrough printed\n%s\nwant\n%s", out, strings.Join(want, "\n"))
	}
}
