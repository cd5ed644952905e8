package manifest_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gotest.tools/v3/golden"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"gridweave.dev/manifest"
	"gridweave.dev/manifest/validation"
)

const chartDir = "../examples/launcher/chart"

var validator = validation.NewValidator()

func renderChart(t *testing.T, values string) ([]*unstructured.Unstructured, []byte) {
	t.Helper()
	v, err := manifest.ParseChartValues("values.yaml", []byte(values))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifest.RenderChart(v, manifest.ChartRelease{Name: "release-name"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := manifest.Marshal(objs)
	if err != nil {
		t.Fatal(err)
	}
	return objs, out
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestChartGoldenAndValid(t *testing.T) {
	for _, c := range []struct{ values, golden string }{
		{"values.yaml", "chart.plain.yaml"},
		{"values-gpu-nebari.yaml", "chart.gpu-nebari.yaml"},
	} {
		t.Run(c.values, func(t *testing.T) {
			objs, out := renderChart(t, readFile(t, filepath.Join(chartDir, c.values)))
			golden.Assert(t, string(out), c.golden)
			var docs []validation.Document
			for _, o := range objs {
				docs = append(docs, validation.Document{Source: c.values, Object: o})
			}
			for _, f := range validation.Lint(validator, docs) {
				if f.Severity == validation.SeverityError {
					t.Errorf("chart output: %s", f)
				}
			}
			for _, o := range objs {
				if o.GetKind() == "Service" && (strings.HasSuffix(o.GetName(), "-head-svc") || strings.HasSuffix(o.GetName(), "-serve-svc")) {
					t.Errorf("Service %s takes a name KubeRay's RayService controller owns", o.GetName())
				}
			}
		})
	}
}

// TestInjectionsRenderNothingUnlessAsked: without a CA bundle and without
// GPUs, the output is byte-identical to the plain render; each injection
// appears only under its condition.
func TestInjectionsRenderNothingUnlessAsked(t *testing.T) {
	plain := readFile(t, filepath.Join(chartDir, "values.yaml"))
	_, base := renderChart(t, plain)
	_, same := renderChart(t, plain+"orgCABundle:\n  configMapName: \"\"\n")
	if !bytes.Equal(base, same) {
		t.Fatal("an empty orgCABundle changed the output")
	}
	_, withCA := renderChart(t, plain+"orgCABundle:\n  configMapName: org-ca\n")
	for _, want := range []string{"build-ca-bundle", "SSL_CERT_FILE", "GIT_SSL_CAINFO", "readOnlyRootFilesystem: true", "runAsNonRoot: true", "name: org-ca"} {
		if !strings.Contains(string(withCA), want) {
			t.Errorf("CA injection lacks %q", want)
		}
	}
	if strings.Contains(string(base), "nvidia.com/gpu") {
		t.Fatal("a CPU chart has a GPU toleration")
	}
	gpu := strings.Replace(plain, "limits: {cpu: \"4\", memory: 16Gi}", "limits: {cpu: \"4\", memory: 16Gi, nvidia.com/gpu: \"1\"}", 1)
	objs, _ := renderChart(t, gpu)
	tols, _, _ := unstructured.NestedSlice(objs[2].Object, "spec", "rayClusterConfig", "workerGroupSpecs")
	wg := tols[0].(map[string]any)
	got, _, _ := unstructured.NestedSlice(wg, "template", "spec", "tolerations")
	if len(got) != 1 || got[0].(map[string]any)["key"] != "nvidia.com/gpu" {
		t.Fatalf("GPU worker tolerations %v", got)
	}
	headTols, _, _ := unstructured.NestedSlice(objs[2].Object, "spec", "rayClusterConfig", "headGroupSpec", "template", "spec", "tolerations")
	if len(headTols) != 0 {
		t.Fatalf("CPU head got tolerations %v", headTols)
	}
	// A user toleration with the key is kept, not duplicated.
	own := strings.Replace(gpu, "worker:\n", "worker:\n  tolerations: [{key: nvidia.com/gpu, operator: Equal, value: a100, effect: NoSchedule}]\n", 1)
	objs, _ = renderChart(t, own)
	wg = mustSlice(objs[2], "spec", "rayClusterConfig", "workerGroupSpecs")[0].(map[string]any)
	got, _, _ = unstructured.NestedSlice(wg, "template", "spec", "tolerations")
	if len(got) != 1 || got[0].(map[string]any)["value"] != "a100" {
		t.Fatalf("user toleration handling %v", got)
	}
}

func TestChartServesOnAllInterfacesAndSelectsItsOwnHead(t *testing.T) {
	objs, _ := renderChart(t, readFile(t, filepath.Join(chartDir, "values.yaml")))
	cfg, _, _ := unstructured.NestedString(objs[2].Object, "spec", "serveConfigV2")
	if !strings.Contains(cfg, "host: 0.0.0.0") || !strings.Contains(cfg, "port: 8000") || !strings.Contains(cfg, "proxy_location: EveryNode") {
		t.Fatalf("serveConfigV2:\n%s", cfg)
	}
	sel, _, _ := unstructured.NestedStringMap(objs[0].Object, "spec", "selector")
	if sel[manifest.RayServiceLabel] != "rayserve" || sel["ray.io/node-type"] != "head" {
		t.Fatalf("dashboard Service selector %v", sel)
	}
	if objs[0].GetAnnotations()["argocd.argoproj.io/compare-options"] != "IgnoreExtraneous" {
		t.Fatal("missing IgnoreExtraneous")
	}
}

func TestChartValuesErrors(t *testing.T) {
	for _, c := range []struct{ doc, path string }{
		{"name: r\nnamespace: ns\nserve: {proxyLocation: Everywhere}\n", "serve.proxyLocation"},
		{"name: r\nnamespace: ns\nserveApplications: [{name: a}]\n", "serveApplications[0].import_path"},
		{"name: r\nnamespace: ns\nexposure: {type: httproute, dashboardHostname: d.example.org}\n", "exposure.gateway.name"},
		{"name: r\nnamespace: ns\nexposure: {type: ingress}\n", "exposure.type"},
		{"name: r\nnamespace: ns\nworker: {replicas: two}\n", "worker.replicas"},
		{"name: r\nnamespace: ns\nworker: {resources: {limit: {cpu: 1}}}\n", "worker.resources.limit"},
	} {
		_, err := manifest.ParseChartValues("values.yaml", []byte(c.doc))
		var se *manifest.SpecError
		if !errors.As(err, &se) || se.Path != c.path {
			t.Errorf("%q: %v, want an error at %s", c.doc, err, c.path)
		}
	}
}

func mustSlice(u *unstructured.Unstructured, path ...string) []any {
	s, _, _ := unstructured.NestedSlice(u.Object, path...)
	return s
}

func FuzzParseChartValues(f *testing.F) {
	f.Add([]byte("name: r\nnamespace: ns\n"))
	f.Add([]byte("name: r\nnamespace: ns\nworker: {resources: {limits: {cpu: x}}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := manifest.ParseChartValues("fuzz.yaml", data)
		var se *manifest.SpecError
		if err != nil {
			if !errors.As(err, &se) {
				t.Fatalf("error %v is not a *SpecError", err)
			}
			checkSpecError(t, err)
			return
		}
		if _, err := manifest.RenderChart(v, manifest.ChartRelease{Name: "release-name"}); err != nil {
			t.Fatalf("valid values failed to render: %v", err)
		}
	})
}

// TestNebariAppGatewayIsAValue: a NebariApp routes through the gateway
// exposure.gateway.name names, public when it names none.
func TestNebariAppGatewayIsAValue(t *testing.T) {
	for values, want := range map[string]string{
		"":                              "public",
		"  gateway: {name: internal}\n": "internal",
	} {
		v, err := manifest.ParseChartValues("v.yaml", []byte("name: llm\nnamespace: ml\nexposure:\n  type: nebariapp\n  dashboardHostname: ray.example.org\n"+values))
		if err != nil {
			t.Fatal(err)
		}
		objs, err := manifest.RenderChart(v, manifest.ChartRelease{Name: "release-name"})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, o := range objs {
			if o.GetKind() == "NebariApp" {
				n++
				if got, _, _ := unstructured.NestedString(o.Object, "spec", "gateway"); got != want {
					t.Errorf("%q: the NebariApp's gateway is %q, want %q", values, got, want)
				}
			}
		}
		if n == 0 {
			t.Errorf("%q: no NebariApp", values)
		}
	}
}

// TestChartNetworkPolicy: off by default (nothing rendered); on, the head
// takes the Ray client port only from the namespaces and pods named, the
// dashboard, Serve and metrics ports from anywhere, and everything from
// the RayService's own pods; on with no client named is an error.
func TestChartNetworkPolicy(t *testing.T) {
	base := "name: llm\nnamespace: ml\n"
	kinds := func(objs []*unstructured.Unstructured) (out []string) {
		for _, o := range objs {
			out = append(out, o.GetKind())
		}
		return out
	}
	plain, _ := renderChart(t, base)
	if slices.Contains(kinds(plain), "NetworkPolicy") {
		t.Error("a NetworkPolicy without networkPolicy.enabled")
	}
	objs, _ := renderChart(t, base+"networkPolicy:\n  enabled: true\n  clientNamespaces: [notebooks]\n  clientPodLabels: {app: jupyter}\n")
	var policy *unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "NetworkPolicy" {
			policy = o
		}
	}
	if policy == nil {
		t.Fatal("no NetworkPolicy")
	}
	selector, _, _ := unstructured.NestedStringMap(policy.Object, "spec", "podSelector", "matchLabels")
	if selector["ray.io/node-type"] != "head" || selector[manifest.RayServiceLabel] != "llm" {
		t.Errorf("the policy selects %v, not the head", selector)
	}
	rules, _, _ := unstructured.NestedSlice(policy.Object, "spec", "ingress")
	if len(rules) != 3 {
		t.Fatalf("%d ingress rules: %v", len(rules), rules)
	}
	client := fmt.Sprint(rules[2])
	for _, want := range []string{"10001", "notebooks", "kubernetes.io/metadata.name", "jupyter"} {
		if !strings.Contains(client, want) {
			t.Errorf("the client rule lacks %s: %s", want, client)
		}
	}
	if open := fmt.Sprint(rules[1]); strings.Contains(open, "from") || !strings.Contains(open, "8265") || strings.Contains(open, "10001") {
		t.Errorf("the open rule: %s", open)
	}
	if _, err := manifest.ParseChartValues("v.yaml", []byte(base+"networkPolicy: {enabled: true}\n")); err == nil || !strings.Contains(err.Error(), "networkPolicy.clientNamespaces") {
		t.Errorf("a policy with no client: %v", err)
	}
}

// TestChartDefaultsToTheRelease: values without a name or namespace
// render every object into the release's namespace, named after the
// release; the values' own name and namespace win; a release name that
// cannot name Services is refused at name.
func TestChartDefaultsToTheRelease(t *testing.T) {
	render := func(values string, release manifest.ChartRelease) ([]*unstructured.Unstructured, error) {
		v, err := manifest.ParseChartValues("values.yaml", []byte(values))
		if err != nil {
			t.Fatal(err)
		}
		return manifest.RenderChart(v, release)
	}
	objs, err := render("serve: {enabled: false}\n", manifest.ChartRelease{Name: "llm", Namespace: "ml"})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetNamespace() != "ml" || !strings.HasPrefix(o.GetName(), "llm") || o.GetLabels()["app.kubernetes.io/instance"] != "llm" {
			t.Errorf("%s %s/%s (labels %v): want it in ml, named after the release llm", o.GetKind(), o.GetNamespace(), o.GetName(), o.GetLabels())
		}
	}
	objs, err = render("name: chat\nnamespace: serving\n", manifest.ChartRelease{Name: "llm", Namespace: "ml"})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetNamespace() != "serving" || !strings.HasPrefix(o.GetName(), "chat") {
			t.Errorf("%s %s/%s: the values name chat in serving", o.GetKind(), o.GetNamespace(), o.GetName())
		}
	}
	if objs, err = render("name: chat\n", manifest.ChartRelease{Name: "llm"}); err != nil || objs[0].GetNamespace() != "default" {
		t.Errorf("no namespace anywhere: %v, want default (%v)", err, objs)
	}
	for _, release := range []string{"", "9lives", strings.Repeat("a", 41)} {
		_, err := render("namespace: ml\n", manifest.ChartRelease{Name: release})
		var se *manifest.SpecError
		if !errors.As(err, &se) || se.Path != "name" {
			t.Errorf("release %q without a name in the values: %v, want an error at name", release, err)
		}
	}
}

// TestChartAutoscaling: autoscaling.enabled turns KubeRay's in-tree
// autoscaler on with the options given, between the worker group's
// minimum and maximum; off, the RayService says nothing of it.
func TestChartAutoscaling(t *testing.T) {
	base := "name: llm\nnamespace: ml\nworker: {replicas: 1, minReplicas: 0, maxReplicas: 4}\n"
	objs, _ := renderChart(t, base)
	if _, found, _ := unstructured.NestedFieldNoCopy(objs[2].Object, "spec", "rayClusterConfig", "enableInTreeAutoscaling"); found {
		t.Error("autoscaling is on without autoscaling.enabled")
	}
	objs, _ = renderChart(t, base+"autoscaling: {enabled: true, idleTimeoutSeconds: 120, upscalingMode: Conservative}\n")
	cluster := objs[2].Object["spec"].(map[string]any)["rayClusterConfig"].(map[string]any)
	if cluster["enableInTreeAutoscaling"] != true {
		t.Fatalf("enableInTreeAutoscaling %v", cluster["enableInTreeAutoscaling"])
	}
	opts, _ := cluster["autoscalerOptions"].(map[string]any)
	if fmt.Sprint(opts["idleTimeoutSeconds"]) != "120" || opts["upscalingMode"] != "Conservative" || opts["version"] != "v2" {
		t.Errorf("autoscalerOptions %v", opts)
	}
	group := cluster["workerGroupSpecs"].([]any)[0].(map[string]any)
	if fmt.Sprint(group["minReplicas"], group["maxReplicas"]) != "0 4" {
		t.Errorf("the group scales between %v and %v, want 0 and 4", group["minReplicas"], group["maxReplicas"])
	}
	if _, err := manifest.ParseChartValues("v.yaml", []byte(base+"autoscaling: {enabled: true, upscalingMode: Eager}\n")); err == nil || !strings.Contains(err.Error(), "autoscaling.upscalingMode") {
		t.Errorf("an unknown upscaling mode: %v", err)
	}
}
