package launchcli

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestLintJSONOutputIsJSON runs the built launcher's `lint -o json` on the
// users' corpus and on every sample of the pinned KubeRay release: stdout
// must be one JSON document (nothing the libraries print may reach it),
// with a finding list and an object count.
func TestLintJSONOutputIsJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the launcher")
	}
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/ray-project/kuberay/ray-operator").Output()
	if err != nil {
		t.Fatal(err)
	}
	samples := filepath.Join(strings.TrimSpace(string(out)), "config", "samples")
	corpus := filepath.Join("..", "..", "..", "manifest", "validation", "testdata", "users")
	for _, dir := range []string{corpus, samples} {
		cmd := exec.Command(builtLauncher(t), "lint", "-o", "json", dir)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if exit, ok := err.(*exec.ExitError); err != nil && (!ok || exit.ExitCode() != 1) {
			t.Fatalf("%s: %v\n%s", dir, err, stderr.String())
		}
		var result struct {
			Objects    int               `json:"objects"`
			Findings   []json.RawMessage `json:"findings"`
			Suppressed []json.RawMessage `json:"suppressed"`
		}
		dec := json.NewDecoder(&stdout)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&result); err != nil {
			t.Fatalf("%s: stdout is not the JSON result: %v", dir, err)
		}
		if dec.More() {
			t.Fatalf("%s: more than one JSON document on stdout", dir)
		}
		if result.Objects < 50 || len(result.Findings) == 0 {
			t.Errorf("%s: %d objects, %d findings", dir, result.Objects, len(result.Findings))
		}
		t.Logf("%s: %d objects, %d findings, stdout is JSON", filepath.Base(dir), result.Objects, len(result.Findings))
	}
}
