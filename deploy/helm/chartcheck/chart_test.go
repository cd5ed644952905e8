package chartcheck

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/xeipuuv/gojsonschema"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	"sigs.k8s.io/yaml"
)

const (
	chartDir = "../rayservice"
	repoRoot = "../../.."
)

var launcher struct {
	once sync.Once
	path string
	err  error
}

// launcherBinary builds the launcher from the repository's own module.
func launcherBinary(t *testing.T) string {
	t.Helper()
	launcher.once.Do(func() {
		dir, err := os.MkdirTemp("", "chartcheck-")
		if err != nil {
			launcher.err = err
			return
		}
		launcher.path = filepath.Join(dir, "launcher")
		cmd := exec.Command("go", "build", "-o", launcher.path, "./examples/launcher")
		cmd.Dir = repoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			launcher.err = fmt.Errorf("build the launcher: %v\n%s", err, out)
		}
	})
	if launcher.err != nil {
		t.Fatal(launcher.err)
	}
	return launcher.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if launcher.path != "" {
		os.RemoveAll(filepath.Dir(launcher.path))
	}
	os.Exit(code)
}

// objects splits YAML documents into objects keyed kind/name, with a
// RayService's serveConfigV2 read as the YAML it is.
func objects(t *testing.T, docs string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, doc := range strings.Split(docs, "\n---") {
		if strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(doc), "---")) == "" {
			continue
		}
		var o map[string]any
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("%v in\n%s", err, doc)
		}
		if o == nil {
			continue
		}
		if spec, ok := o["spec"].(map[string]any); ok {
			if sc, ok := spec["serveConfigV2"].(string); ok {
				var parsed any
				if err := yaml.Unmarshal([]byte(sc), &parsed); err != nil {
					t.Fatalf("serveConfigV2: %v", err)
				}
				spec["serveConfigV2"] = parsed
			}
		}
		meta, _ := o["metadata"].(map[string]any)
		out[fmt.Sprintf("%v/%v", o["kind"], meta["name"])] = o
	}
	return out
}

// release is a Helm release's name and namespace.
type release struct{ name, namespace string }

// defaultRelease is what `helm template` and `launcher chart render` use
// when told nothing.
var defaultRelease = release{"release-name", "default"}

// helmRender renders the chart with Helm's engine (the values checked
// against values.schema.json first, as helm install does).
func helmRender(t *testing.T, values map[string]any, rel release) (map[string]map[string]any, error) {
	t.Helper()
	chrt, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	vals, err := util.ToRenderValuesWithSchemaValidation(chrt, values, common.ReleaseOptions{Name: rel.name, Namespace: rel.namespace, IsInstall: true}, nil, false)
	if err != nil {
		return nil, err
	}
	files, err := engine.Render(chrt, vals)
	if err != nil {
		return nil, err
	}
	var names []string
	for name := range files {
		if strings.HasSuffix(name, ".yaml") {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var all strings.Builder
	for _, name := range names {
		all.WriteString("\n---\n" + files[name])
	}
	return objects(t, all.String()), nil
}

// goRender renders the same values with `launcher chart render`.
func goRender(t *testing.T, values map[string]any, rel release) (map[string]map[string]any, error) {
	t.Helper()
	raw, err := yaml.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(file, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(launcherBinary(t), "chart", "render", "--release", rel.name, "-n", rel.namespace, file)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%v: %s", err, stderr.String())
	}
	return objects(t, stdout.String()), nil
}

// same fails the test unless both renderings hold the same objects, and
// returns them.
func same(t *testing.T, what string, values map[string]any, rel release) map[string]map[string]any {
	t.Helper()
	want, err := goRender(t, values, rel)
	if err != nil {
		t.Fatalf("%s: the launcher refuses: %v", what, err)
	}
	got, err := helmRender(t, values, rel)
	if err != nil {
		t.Fatalf("%s: helm refuses: %v", what, err)
	}
	keys := func(m map[string]map[string]any) []string {
		var k []string
		for key := range m {
			k = append(k, key)
		}
		sort.Strings(k)
		return k
	}
	if !slices.Equal(keys(want), keys(got)) {
		t.Errorf("%s: the launcher renders %v, helm %v", what, keys(want), keys(got))
		return got
	}
	for key, w := range want {
		if !reflect.DeepEqual(w, got[key]) {
			wy, _ := yaml.Marshal(w)
			gy, _ := yaml.Marshal(got[key])
			t.Errorf("%s: %s differs\nlauncher:\n%s\nhelm:\n%s", what, key, wy, gy)
		}
	}
	return got
}

func readValues(t *testing.T, path string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := yaml.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestChartRendersAsTheLauncher: the example values, then every
// combination of the chart's switches (Serve on or off; no exposure, an
// HTTPRoute or a NebariApp; a CA bundle; GPUs in the workers with or
// without a toleration of their own; the NetworkPolicy), render to the
// same objects with Helm's engine as with the launcher.
func TestChartRendersAsTheLauncher(t *testing.T) {
	for _, file := range []string{"values.yaml", "values-gpu-nebari.yaml"} {
		same(t, file, readValues(t, filepath.Join(repoRoot, "examples", "launcher", "chart", file)), defaultRelease)
	}
	n := 0
	for _, serve := range []bool{false, true} {
		for _, expose := range []string{"", "httproute", "nebariapp"} {
			for _, ca := range []bool{false, true} {
				for _, gpu := range []string{"none", "gpu", "gpu-tolerated"} {
					for _, policy := range []bool{false, true} {
						v := map[string]any{
							"name": "llm", "namespace": "ml", "image": "rayproject/ray:2.54.0-py312-gpu",
							"serve":             map[string]any{"enabled": serve, "proxyLocation": "HeadOnly"},
							"serveApplications": []any{map[string]any{"name": "llm", "import_path": "serve_llm:app", "route_prefix": "/"}},
							"head":              map[string]any{"resources": map[string]any{"limits": map[string]any{"cpu": "2", "memory": "8Gi"}}, "rayStartParams": map[string]any{"num-cpus": "0"}},
							"worker":            map[string]any{"replicas": 2, "minReplicas": 1, "maxReplicas": 4},
						}
						worker := v["worker"].(map[string]any)
						switch gpu {
						case "gpu":
							worker["resources"] = map[string]any{"limits": map[string]any{"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "1"}}
						case "gpu-tolerated":
							worker["resources"] = map[string]any{"requests": map[string]any{"nvidia.com/gpu": "1"}, "limits": map[string]any{"nvidia.com/gpu": "1"}}
							worker["tolerations"] = []any{map[string]any{"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}}
						}
						if ca {
							v["orgCABundle"] = map[string]any{"configMapName": "org-ca", "key": "root.pem"}
						}
						switch expose {
						case "httproute":
							v["exposure"] = map[string]any{"type": expose, "dashboardHostname": "ray.example.org", "serveHostname": "llm.example.org",
								"gateway": map[string]any{"name": "edge", "namespace": "gateways", "sectionName": "https"}}
						case "nebariapp":
							v["exposure"] = map[string]any{"type": expose, "dashboardHostname": "ray.example.org", "serveHostname": "llm.example.org", "auth": true}
						}
						if policy {
							v["networkPolicy"] = map[string]any{"enabled": true, "clientNamespaces": []any{"notebooks"}, "clientPodLabels": map[string]any{"app": "jupyter"}}
						}
						same(t, fmt.Sprintf("serve=%v exposure=%q ca=%v gpu=%s policy=%v", serve, expose, ca, gpu, policy), v, defaultRelease)
						n++
					}
				}
			}
		}
	}
	for _, autoscaling := range []map[string]any{
		{"enabled": true},
		{"enabled": true, "idleTimeoutSeconds": 0},
		{"enabled": true, "idleTimeoutSeconds": 120, "upscalingMode": "Aggressive"},
		{"enabled": false, "upscalingMode": "Conservative"},
	} {
		v := map[string]any{"worker": map[string]any{"replicas": 1, "minReplicas": 0, "maxReplicas": 8}, "autoscaling": autoscaling}
		same(t, fmt.Sprintf("autoscaling %v", autoscaling), v, release{"llm", "ml"})
		n++
	}
	t.Logf("%d combinations render alike", n)
}

// TestValuesSchemaIsTheLaunchers: the chart's values.schema.json is what
// `launcher schema chart-values` prints, and Helm refuses what the
// launcher refuses.
func TestValuesSchemaIsTheLaunchers(t *testing.T) {
	out, err := exec.Command(launcherBinary(t), "schema", "chart-values").Output()
	if err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(bytes.TrimSpace(out), bytes.TrimSpace(file)) {
		t.Fatal("values.schema.json is not `launcher schema chart-values`: run go run ./examples/launcher schema chart-values > deploy/helm/rayservice/values.schema.json")
	}
	base := func() map[string]any {
		return map[string]any{"name": "llm", "namespace": "ml"}
	}
	for what, change := range map[string]func(map[string]any){
		"a name not DNS-1035":      func(v map[string]any) { v["name"] = "9lives" },
		"a namespace not DNS-1123": func(v map[string]any) { v["namespace"] = "Bad_NS" },
		"an upscaling mode":        func(v map[string]any) { v["autoscaling"] = map[string]any{"enabled": true, "upscalingMode": "Eager"} },
		"a name too long":          func(v map[string]any) { v["name"] = strings.Repeat("a", 41) },
		"an unknown key":           func(v map[string]any) { v["replica"] = 2 },
		"a bad proxy location":     func(v map[string]any) { v["serve"] = map[string]any{"proxyLocation": "Nowhere"} },
		"an app without import":    func(v map[string]any) { v["serveApplications"] = []any{map[string]any{"name": "x"}} },
		"a route without gateway": func(v map[string]any) {
			v["exposure"] = map[string]any{"type": "httproute", "dashboardHostname": "ray.example.org"}
		},
		"a policy without clients": func(v map[string]any) { v["networkPolicy"] = map[string]any{"enabled": true} },
	} {
		v := base()
		change(v)
		_, goErr := goRender(t, v, defaultRelease)
		_, helmErr := helmRender(t, v, defaultRelease)
		if goErr == nil || helmErr == nil {
			t.Errorf("%s: the launcher says %v, helm %v; want both to refuse", what, goErr, helmErr)
		}
		if err := helm3Validate(t, file, v); err == nil {
			t.Errorf("%s: Helm 3.17's validator accepts it", what)
		}
	}
	for what, v := range map[string]map[string]any{
		"the chart's values": readValues(t, filepath.Join(chartDir, "values.yaml")),
		"its CI values":      readValues(t, filepath.Join(chartDir, "ci", "plain-values.yaml")),
		"the GPU example":    readValues(t, filepath.Join(repoRoot, "examples", "launcher", "chart", "values-gpu-nebari.yaml")),
		"no values":          {},
	} {
		if err := helm3Validate(t, file, v); err != nil {
			t.Errorf("%s: Helm 3.17's validator refuses: %v", what, err)
		}
	}
}

// helm3Validate checks values against the schema as Helm 3 before 3.18
// did: gojsonschema, a validator of drafts 4, 6 and 7.
func helm3Validate(t *testing.T, schema []byte, values map[string]any) error {
	t.Helper()
	if values == nil {
		values = map[string]any{}
	}
	result, err := gojsonschema.Validate(gojsonschema.NewBytesLoader(schema), gojsonschema.NewGoLoader(values))
	if err != nil {
		t.Fatalf("Helm 3.17's validator cannot read the schema: %v", err)
	}
	if !result.Valid() {
		return fmt.Errorf("%v", result.Errors())
	}
	return nil
}

// TestHelmLint: helm lint of the chart is clean with its own values
// alone (no -f) and with its CI values.
func TestHelmLint(t *testing.T) {
	for what, values := range map[string]map[string]any{
		"no values":       nil,
		"its CI values":   readValues(t, filepath.Join(chartDir, "ci", "plain-values.yaml")),
		"another release": {"autoscaling": map[string]any{"enabled": true, "idleTimeoutSeconds": 30}},
	} {
		l := lint.RunAll(chartDir, values, "ray")
		for _, m := range l.Messages {
			if m.Severity > support.InfoSev {
				t.Errorf("helm lint with %s: %s", what, m)
			}
		}
		if len(l.Messages) > 0 {
			t.Logf("helm lint with %s said: %v", what, l.Messages)
		}
	}
}

// TestChartDefaultsToTheRelease: `helm template llm deploy/helm/rayservice
// -n ml` with the chart's own values puts every object in ml, named after
// the release, as `launcher chart render --release llm -n ml` does; the
// values' name and namespace still win; a release name that cannot
// prefix Services is refused by both, naming name.
func TestChartDefaultsToTheRelease(t *testing.T) {
	own := readValues(t, filepath.Join(chartDir, "values.yaml"))
	objs := same(t, "the chart's own values, release llm in ml", own, release{"llm", "ml"})
	if len(objs) == 0 {
		t.Fatal("nothing rendered")
	}
	for key, o := range objs {
		meta := o["metadata"].(map[string]any)
		labels, _ := meta["labels"].(map[string]any)
		if meta["namespace"] != "ml" || !strings.HasPrefix(fmt.Sprint(meta["name"]), "llm") || labels["app.kubernetes.io/instance"] != "llm" {
			t.Errorf("%s is in %v named %v (labels %v): want ml, after the release llm", key, meta["namespace"], meta["name"], labels)
		}
	}
	if _, ok := objs["RayService/llm"]; !ok {
		t.Errorf("no RayService llm among %v", slices.Sorted(maps.Keys(objs)))
	}
	objs = same(t, "values naming chat in serving", map[string]any{"name": "chat", "namespace": "serving"}, release{"llm", "ml"})
	for key, o := range objs {
		if meta := o["metadata"].(map[string]any); meta["namespace"] != "serving" || !strings.HasPrefix(fmt.Sprint(meta["name"]), "chat") {
			t.Errorf("%s is in %v named %v: the values say chat in serving", key, meta["namespace"], meta["name"])
		}
	}
	for _, name := range []string{"9lives", strings.Repeat("a", 41)} {
		_, goErr := goRender(t, own, release{name, "ml"})
		_, helmErr := helmRender(t, own, release{name, "ml"})
		if goErr == nil || helmErr == nil || !strings.Contains(goErr.Error(), "name") || !strings.Contains(helmErr.Error(), "name:") {
			t.Errorf("release %q: the launcher says %v, helm %v; want both to refuse, naming name", name, goErr, helmErr)
		}
	}
}
