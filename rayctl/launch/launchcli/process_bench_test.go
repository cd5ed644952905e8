package launchcli

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	sigsyaml "sigs.k8s.io/yaml"

	"gridweave.dev/manifest/validation"
)

// smallRayCluster is the file `lint` of one RayCluster is measured on.
const smallRayCluster = `apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: small
spec:
  rayVersion: "2.46.0"
  headGroupSpec:
    rayStartParams: {}
    template:
      spec:
        containers:
        - name: ray-head
          image: rayproject/ray:2.46.0
          resources:
            limits: {cpu: "1", memory: 2Gi}
            requests: {cpu: "1", memory: 2Gi}
  workerGroupSpecs:
  - groupName: cpu
    replicas: 1
    minReplicas: 1
    maxReplicas: 2
    rayStartParams: {}
    template:
      spec:
        containers:
        - name: ray-worker
          image: rayproject/ray:2.46.0
          resources:
            limits: {cpu: "1", memory: 2Gi}
            requests: {cpu: "1", memory: 2Gi}
`

// BenchmarkProcess measures the offline commands as users run them, from
// an editor, a pre-commit hook or CI: a fresh process each time. ns/op is
// the wall time of one run, peak-MB the largest resident set of the runs.
// kubeconform-RayCluster runs kubeconform v0.8.0 (installed from the module
// proxy) in strict mode with KubeRay's CRD schemas as JSON, on the same
// file as lint-RayCluster: the figure lint's is compared with.
//
//	go test -run '^$' -bench BenchmarkProcess ./rayctl/launch/launchcli/
func BenchmarkProcess(b *testing.B) {
	dir := b.TempDir()
	bin := installedCopy(b, builtLauncher(b), dir)
	rayCluster := filepath.Join(dir, "raycluster.yaml")
	if err := os.WriteFile(rayCluster, []byte(smallRayCluster), 0o644); err != nil {
		b.Fatal(err)
	}
	// The mistakes users make most: a mistyped field, a value of the wrong
	// type. Each costs what finding it loads, beyond the valid file's.
	mistyped := filepath.Join(dir, "raycluster-mistyped-field.yaml")
	wrongType := filepath.Join(dir, "raycluster-wrong-type.yaml")
	for file, mistake := range map[string][2]string{
		mistyped:  {"rayVersion: \"2.46.0\"", "rayVersion: \"2.46.0\"\n  enableInTreeAutoscalling: true"},
		wrongType: {"replicas: 1", "replicas: \"1\""},
	} {
		if !strings.Contains(smallRayCluster, mistake[0]) {
			b.Fatalf("%q is not in the RayCluster", mistake[0])
		}
		if err := os.WriteFile(file, []byte(strings.Replace(smallRayCluster, mistake[0], mistake[1], 1)), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	for file, finding := range map[string]string{mistyped: "[unknown-field] spec.enableInTreeAutoscalling", wrongType: "[schema] spec.workerGroupSpecs[0].replicas"} {
		if out, _ := exec.Command(bin, "lint", file).Output(); !strings.Contains(string(out), finding) {
			b.Fatalf("lint %s: no %s in\n%s", file, finding, out)
		}
	}
	recipe, infra := filepath.Join(specs, "grpo_swe.recipe.yaml"), filepath.Join(specs, "grpo_swe.infra.yaml")
	cases := []struct {
		name string
		argv []string
		exit int // the corpus has mistakes: 1
	}{
		{"help", []string{bin, "--help"}, 0},
		{"lint-RayCluster", []string{bin, "lint", rayCluster}, 0},
		{"lint-RayCluster-mistyped-field", []string{bin, "lint", mistyped}, 1},
		{"lint-RayCluster-wrong-type", []string{bin, "lint", wrongType}, 1},
		{"check-grpo_swe", []string{bin, "check", recipe, infra}, 0},
		{"render-grpo_swe", []string{bin, "render", recipe, infra}, 0},
		{"lint-users-corpus", []string{bin, "lint", filepath.Join("..", "..", "..", "manifest", "validation", "testdata", "users")}, 1},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) { measureProcess(b, c.argv, c.exit) })
	}
	// Input of any size: kubeconform's valid_large.yaml (one block List of
	// 100,000 ConfigMaps) and the same objects as one JSON List.
	large := kubeconformFixture(b, "valid_large.yaml")
	jsonList := filepath.Join(dir, "large.json")
	if err := writeJSONList(jsonList, 100000); err != nil {
		b.Fatal(err)
	}
	b.Run("lint-valid_large", func(b *testing.B) { measureProcess(b, []string{bin, "lint", large}, 0) })
	b.Run("lint-json-list-100k", func(b *testing.B) { measureProcess(b, []string{bin, "lint", jsonList}, 0) })
	b.Run("kubeconform-RayCluster", func(b *testing.B) {
		kubeconform, schemas := installKubeconform(b, dir)
		measureProcess(b, []string{kubeconform, "-strict", "-schema-location", filepath.Join(schemas, "{{.ResourceKind}}_{{.ResourceAPIVersion}}.json"), rayCluster}, 0)
	})
}

// installedCopy is the binary written again in one sequential pass, as a
// package manager or a download writes it, so that peak-MB is the same
// from run to run. The file the linker writes (through mmap; go install
// moves it into place) is laid out in the page cache differently from
// build to build, and with it the pages a process maps from it: one and
// the same lint of a RayCluster peaked between 46 and 54 MB run from such
// files, at 41 MB from any copy (kernel 6.18, ext4).
func installedCopy(b *testing.B, built, dir string) string {
	src, err := os.Open(built)
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	path := filepath.Join(dir, "launcher")
	dst, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		b.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		b.Fatal(err)
	}
	return path
}

// measureProcess runs argv once per iteration; any exit status but the
// expected one fails the benchmark. The peak resident set is read
// from one more run under GNU time (a child forked from this process
// would count this process's pages until it execs).
func measureProcess(b *testing.B, argv []string, wantExit int) {
	run := func(argv []string) {
		err := exec.Command(argv[0], argv[1:]...).Run()
		code := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		} else if err != nil {
			b.Fatalf("%v: %v", argv, err)
		}
		if code != wantExit {
			b.Fatalf("%v: exit status %d, want %d", argv, code, wantExit)
		}
	}
	for b.Loop() {
		run(argv)
	}
	if _, err := os.Stat("/usr/bin/time"); err != nil {
		return // no GNU time (Debian package time): no peak figure
	}
	report := filepath.Join(b.TempDir(), "rss")
	run(append([]string{"/usr/bin/time", "-f", "%M", "-o", report}, argv...))
	data, err := os.ReadFile(report)
	if err != nil {
		b.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n") // a failed command's status comes first
	kb, err := strconv.Atoi(lines[len(lines)-1])
	if err != nil {
		b.Fatalf("GNU time's report %q: %v", data, err)
	}
	b.ReportMetric(float64(kb)/1024, "peak-MB")
}

// installKubeconform installs kubeconform v0.8.0 into dir and writes
// KubeRay's RayCluster schemas there as kubeconform reads them
// (kind_version.json).
func installKubeconform(b *testing.B, dir string) (binary, schemas string) {
	install := exec.Command("go", "install", "github.com/yannh/kubeconform/cmd/kubeconform@v0.8.0")
	install.Env = append(os.Environ(), "GOBIN="+dir)
	if out, err := install.CombinedOutput(); err != nil {
		b.Skipf("kubeconform could not be installed from the module proxy: %v\n%s", err, out)
	}
	crd, err := validation.EmbeddedCRD("rayclusters.ray.io")
	if err != nil {
		b.Fatal(err)
	}
	var parsed struct {
		Spec struct {
			Versions []struct {
				Name   string
				Schema struct {
					OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
				}
			}
		}
	}
	if err := sigsyaml.Unmarshal(crd, &parsed); err != nil {
		b.Fatal(err)
	}
	schemas = filepath.Join(dir, "schemas")
	if err := os.MkdirAll(schemas, 0o755); err != nil {
		b.Fatal(err)
	}
	for _, v := range parsed.Spec.Versions {
		data, err := json.Marshal(v.Schema.OpenAPIV3Schema)
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(schemas, "raycluster_"+v.Name+".json"), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return filepath.Join(dir, "kubeconform"), schemas
}

// kubeconformFixture is the path of one of kubeconform v0.8.0's fixtures,
// downloaded to the module cache.
func kubeconformFixture(b *testing.B, name string) string {
	out, err := exec.Command("go", "mod", "download", "-json", "github.com/yannh/kubeconform@v0.8.0").Output()
	if err != nil {
		b.Fatalf("go mod download kubeconform: %v", err)
	}
	var module struct{ Dir string }
	if err := json.Unmarshal(out, &module); err != nil || module.Dir == "" {
		b.Fatalf("go mod download kubeconform: %s", out)
	}
	return filepath.Join(module.Dir, "fixtures", name)
}

// writeJSONList writes one JSON List of n ConfigMaps, on one line.
func writeJSONList(path string, n int) error {
	items := make([]map[string]any, n)
	for i := range items {
		items[i] = map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "cm-" + strconv.Itoa(i)}, "data": map[string]any{"key": "value"}}
	}
	data, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}
