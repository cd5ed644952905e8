package launchcli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const specs = "../../../examples/launcher/specs"

func runLauncher(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Run(context.Background(), args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestCheckExamples(t *testing.T) {
	for _, infra := range []string{"grpo_swe.infra.yaml", "grpo_swe_sglang.infra.yaml"} {
		code, out, errOut := runLauncher(t, "", "check", filepath.Join(specs, "grpo_swe.recipe.yaml"), filepath.Join(specs, infra))
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s%s", infra, code, out, errOut)
		}
		for _, want := range []string{"trainer: CPU=32 GPU=8 memory=256Gi dockyard_fleet_trainer=8", "inference: CPU=32 GPU=8", "0 errors"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: output lacks %q:\n%s", infra, want, out)
			}
		}
	}
}

func TestCheckNamesTheBrokenField(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.infra.yaml")
	os.WriteFile(bad, []byte("namespace: dockyard\nimages: {vllm: x}\nlaunch:\n  mode: rayjob\nsandbox:\n  replcas: 3\n"), 0o644)
	code, _, errOut := runLauncher(t, "", "check", filepath.Join(specs, "grpo_swe.recipe.yaml"), bad)
	if code != 1 || !strings.Contains(errOut, "bad.infra.yaml:6: sandbox.replcas: unknown field; did you mean \"replicas\"?") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

func TestRenderToStdoutAndDirectory(t *testing.T) {
	code, out, _ := runLauncher(t, "", "render", filepath.Join(specs, "grpo_swe.recipe.yaml"), filepath.Join(specs, "grpo_swe.infra.yaml"))
	golden, err := os.ReadFile("../../../manifest/testdata/grpo_swe.vllm.rayjob.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if code != 0 || out != string(golden) {
		t.Fatalf("render differs from the manifest golden file (exit %d)", code)
	}
	dir := t.TempDir()
	code, _, _ = runLauncher(t, "", "render", "-o", dir, "-n", "elsewhere", filepath.Join(specs, "grpo_swe.recipe.yaml"), filepath.Join(specs, "grpo_swe.infra.yaml"))
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	want := "01-deployment-grpo-swe-sandbox.yaml 02-service-grpo-swe-sandbox.yaml 03-networkpolicy-grpo-swe-sandbox.yaml 04-poddisruptionbudget-grpo-swe-sandbox.yaml 05-networkpolicy-grpo-swe-head.yaml 06-rayjob-grpo-swe.yaml"
	if code != 0 || strings.Join(names, " ") != want {
		t.Fatalf("files %v (exit %d)", names, code)
	}
	job, _ := os.ReadFile(filepath.Join(dir, "06-rayjob-grpo-swe.yaml"))
	if !strings.Contains(string(job), "namespace: elsewhere") {
		t.Error("-n did not override the namespace")
	}
}

func TestLintStdinFilesAndJSON(t *testing.T) {
	bad := "apiVersion: ray.io/v1\nkind: RayJob\nmetadata: {name: j}\nspec:\n  entrypoint: python x.py\n  ttlSecondsAfterFinished: 60\n  clusterSelector: {ray.io/cluster: shared}\n"
	code, out, _ := runLauncher(t, bad, "lint", "-")
	if code != 1 || !strings.Contains(out, "stdin:6: RayJob j: error [rayjob-ttl-without-shutdown] spec.ttlSecondsAfterFinished") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	code, out, _ = runLauncher(t, bad, "lint", "-o", "json", "-")
	var report struct {
		Objects  int `json:"objects"`
		Findings []struct {
			ID, Severity, Path string
			Line               int
		} `json:"findings"`
	}
	if err := json.Unmarshal([]byte(out), &report); err != nil || code != 1 || report.Objects != 1 || len(report.Findings) == 0 {
		t.Fatalf("json report %q (exit %d, %v)", out, code, err)
	}
	for _, f := range report.Findings {
		if f.ID == "rayjob-ttl-without-shutdown" && f.Line != 6 {
			t.Errorf("json finding %+v: want line 6", f)
		}
	}
	code, out, _ = runLauncher(t, "", "lint", filepath.Join(specs, "ray-cpu-demo.yaml"))
	if code != 0 || !strings.Contains(out, "1 objects, 0 errors, 0 warnings") {
		t.Fatalf("the operator review's example: exit %d\n%s", code, out)
	}
	// A directory: warnings only → exit 0.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "cron.yaml"), []byte("apiVersion: ray.io/v1\nkind: RayCronJob\nmetadata: {name: n}\nspec:\n  schedule: \"0 3 * * *\"\n  jobTemplate:\n    entrypoint: x\n    shutdownAfterJobFinishes: true\n    clusterSelector: {ray.io/cluster: c}\n"), 0o644)
	code, out, _ = runLauncher(t, "", "lint", dir)
	if code != 0 || !strings.Contains(out, "raycronjob-feature-gate") {
		t.Fatalf("warnings only: exit %d\n%s", code, out)
	}
	if code, _, errOut := runLauncher(t, "", "lint", "-o", "xml", "-"); code != 2 || !strings.Contains(errOut, "want one of text, json, sarif, junit, github") {
		t.Fatalf("bad -o: exit %d %q", code, errOut)
	}
	if code, _, _ := runLauncher(t, "", "lint", "/does/not/exist"); code != 2 {
		t.Fatalf("missing path: exit %d", code)
	}
}

func TestChartRender(t *testing.T) {
	code, out, errOut := runLauncher(t, "", "chart", "render", "../../../examples/launcher/chart/values.yaml")
	golden, _ := os.ReadFile("../../../manifest/testdata/chart.plain.yaml")
	if code != 0 || out != string(golden) {
		t.Fatalf("chart render differs from the golden file (exit %d) %s", code, errOut)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "v.yaml"), []byte("name: r\nnamespace: ns\nserve: {proxyLocation: Everywhere}\n"), 0o644)
	if code, _, errOut := runLauncher(t, "", "chart", "render", filepath.Join(dir, "v.yaml")); code != 1 || !strings.Contains(errOut, "serve.proxyLocation") {
		t.Fatalf("bad values: exit %d %q", code, errOut)
	}
}
