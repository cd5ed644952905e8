package manifest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"sigs.k8s.io/yaml"

	"gridweave.dev/manifest"
)

// schemaCase is one kind of spec file: its parser and its examples.
type schemaCase struct {
	kind     string
	parse    func(data []byte) error
	examples []string
	// mutations are the checks the parser makes beyond types and keys,
	// each a change of an example: path → new value (nil deletes).
	mutations []map[string]any
}

var schemaCases = []schemaCase{
	{"recipe", func(d []byte) error { _, err := manifest.ParseRecipe("r.yaml", d); return err },
		[]string{"../examples/launcher/specs/grpo_swe.recipe.yaml"},
		[]map[string]any{
			{"name": "Bad_Name"}, {"name": strings.Repeat("a", 48)}, {"name": strings.Repeat("a", 47)}, {"name": "9lives"},
			{"fleets.Bad-Role": map[string]any{"replicas": 1, "gpusPerNode": 1}}, {"fleets.extra_role": map[string]any{"replicas": 1}},
			{"fleets.trainer.replicas": 0}, {"fleets.trainer.gpusPerNode": -1}, {"fleets.trainer.cpu": "lots"}, {"fleets.trainer.cpu": "-1"},
			{"fleets.trainer.cpu": 4}, {"fleets.trainer.cpu": "500m"}, {"fleets.trainer.memory": "16Gi"}, {"fleets.trainer.memory": -2},
			{"inference.backend": ""}, {"inference.backend": "sglang"}, {"fleets": map[string]any{}}, {"entrypoint": ""},
			{"entrypoint": 42}, {"runtimeEnv": map[string]any{"env_vars": map[string]any{"SEED": 7, "DEBUG": true}}},
		}},
	{"infra", func(d []byte) error { _, err := manifest.ParseInfra("i.yaml", d); return err },
		[]string{"../examples/launcher/specs/grpo_swe.infra.yaml", "../examples/launcher/specs/grpo_swe_sglang.infra.yaml"},
		[]map[string]any{
			{"namespace": "Bad_NS"}, {"namespace": strings.Repeat("n", 64)}, {"namespace": "team-a"},
			{"launch.mode": "sometimes"}, {"launch.mode": "attach", "images": nil}, {"launch.mode": "bringup", "images": nil},
			{"launch.mode": "bringup", "images": map[string]any{}}, {"images.vllm": ""},
			{"imagePullSecrets": []any{"Bad_Secret"}}, {"imagePullSecrets": []any{"regcred", "team.registry"}},
			{"launch.ttlSecondsAfterFinished": -1}, {"launch.ttlSecondsAfterFinished": 0},
			{"launch.backoffLimit": 2}, {"launch.backoffLimit": -1}, {"launch.activeDeadlineSeconds": 0}, {"launch.activeDeadlineSeconds": 3600}, {"launch.preRunningDeadlineSeconds": 0}, {"launch.preRunningDeadlineSeconds": 900},
			{"launch.submitterConfig": map[string]any{"backoffLimit": -1}}, {"launch.submitterConfig": map[string]any{"backoffLimit": 3}},
			{"launch.mode": "bringup", "launch.backoffLimit": 1}, {"launch.mode": "bringup", "launch.submitterConfig": map[string]any{}},
			{"launch.submissionMode": "SidecarMode"}, {"launch.submissionMode": "HTTPMode"}, {"launch.submissionMode": "Sidecar"},
			{"launch.mode": "bringup", "launch.submissionMode": "SidecarMode"},
			{"launch.mode": "rayjob", "launch.submissionMode": "SidecarMode"}, {"launch.mode": "rayjob", "launch.submissionMode": "HTTPMode", "launch.submitterConfig": map[string]any{}},
			{"launch.mode": "rayjob", "launch.submissionMode": "SidecarMode", "launch.submitterConfig": map[string]any{"backoffLimit": 1}},
			{"sandbox.replicas": -1}, {"sandbox.port": 70000}, {"sandbox.port": 8080},
			{"sandbox.networkPolicy.allowedEgressCidrs": []any{"10.0.0.0/33"}}, {"sandbox.networkPolicy.allowedEgressCidrs": []any{"300.0.0.0/8"}},
			{"sandbox.networkPolicy.allowedEgressCidrs": []any{"10.1.0.0/16", "fd00::/8"}}, {"sandbox.networkPolicy.allowedEgressCidrs": []any{"010.0.0.0/8"}},
			{"sandbox.pdb.maxUnavailable": -1}, {"sandbox.pdb.minAvailable": 1},
			{"sandbox.networkPolicy.allowEgress": true, "sandbox.networkPolicy.allowedEgressCidrs": []any{"10.0.0.0/8"}},
			{"sandbox.networkPolicy.enabled": false, "sandbox.networkPolicy.allowedEgressCidrs": []any{"10.0.0.0/8"}},
			{"sandbox.networkPolicy.allowEgress": true, "sandbox.networkPolicy.allowedEgressCidrs": []any{}},
			{"sandbox.networkPolicy.allowEgress": nil, "sandbox.networkPolicy.allowedEgressCidrs": []any{"10.0.0.0/8"}},
			{"kuberay.pdb.minAvailable": 2, "kuberay.pdb.maxUnavailable": 1}, {"kuberay.pdb.minAvailable": 2, "kuberay.pdb.maxUnavailable": nil},
			{"kuberay.pdb.minAvailable": -1, "kuberay.pdb.maxUnavailable": nil},
			{"sandbox.resources.cpu": "lots"}, {"sandbox.resources.memoryLimit": "-1Gi"},
			{"infra.resourceQuota": map[string]any{"enabled": true, "hard": map[string]any{"requests.cpu": "lots"}}},
			{"infra.resourceQuota": map[string]any{"enabled": true, "hard": map[string]any{"requests.cpu": "64"}}},
			{"infra.limitRange": map[string]any{"enabled": true, "max": map[string]any{"memory": "-1"}}},
			{"infra.priorityClassName": "Bad_PC"}, {"infra.priorityClassName": "high-priority"},
			{"kuberay.spec": map[string]any{"enableInTreeAutoscaling": true}}, {"kuberay.spec": map[string]any{"enableInTreeAutoscalin": true}},
		}},
	{"chart-values", func(d []byte) error { _, err := manifest.ParseChartValues("v.yaml", d); return err },
		[]string{"../examples/launcher/chart/values.yaml", "../examples/launcher/chart/values-gpu-nebari.yaml"},
		[]map[string]any{
			{"name": strings.Repeat("a", 41)}, {"name": strings.Repeat("a", 40)}, {"name": "Bad"}, {"namespace": "Bad_NS"},
			{"serve.proxyLocation": "Nowhere"}, {"serve.proxyLocation": "HeadOnly"},
			{"exposure.type": "ingress"}, {"exposure.type": "httproute", "exposure.dashboardHostname": "ray.example.com", "exposure.gateway.name": nil, "exposure.auth": nil},
			{"exposure.type": "httproute", "exposure.dashboardHostname": "ray.example.com", "exposure.gateway": map[string]any{"name": "public"}, "exposure.auth": nil},
			{"exposure.type": "httproute", "exposure.dashboardHostname": "ray.example.com", "exposure.gateway": map[string]any{"name": "public"}, "exposure.auth": true},
			{"exposure.type": "nebariapp", "exposure.dashboardHostname": ""},
			{"exposure.type": "nebariapp", "exposure.dashboardHostname": "d.example.com", "serve.enabled": true, "exposure.serveHostname": ""},
			{"exposure.type": "nebariapp", "exposure.dashboardHostname": "d.example.com", "serve.enabled": true, "exposure.serveHostname": "s.example.com"},
			{"serveApplications": []any{map[string]any{"name": "app"}}}, {"serveApplications": []any{map[string]any{"name": "app", "import_path": "m:app"}}},
			{"networkPolicy": map[string]any{"enabled": true}}, {"networkPolicy": map[string]any{"enabled": true, "clientNamespaces": []any{"notebooks"}}},
			{"networkPolicy": map[string]any{"enabled": true, "clientPodLabels": map[string]any{"app": "jupyter"}}},
			{"networkPolicy": map[string]any{"enabled": true, "clientNamespaces": []any{"Bad_NS"}}}, {"networkPolicy": map[string]any{"enabled": false}},
			{"worker.replicas": "two"}, {"head.tolerations": []any{map[string]any{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}}},
			{"name": nil, "namespace": nil}, {"name": ""}, {"name": "9lives"},
			{"autoscaling": map[string]any{"enabled": true, "idleTimeoutSeconds": 30, "upscalingMode": "Conservative"}},
			{"autoscaling": map[string]any{"enabled": true, "upscalingMode": "Eager"}}, {"autoscaling": map[string]any{"idleTimeoutSeconds": -1}},
			{"autoscaling": map[string]any{"idleTimeout": 30}},
		}},
}

// compile compiles a kind's schema.
func compile(t *testing.T, kind string) *jsonschema.Schema {
	t.Helper()
	raw, err := manifest.Schema(kind)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	url := "https://gridweave.dev/schemas/" + kind + ".json"
	if err := c.AddResource(url, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(url)
	if err != nil {
		t.Fatalf("%s: the schema does not compile as its draft: %v", kind, err)
	}
	return s
}

// agree checks that the parser and the schema judge a document alike.
func agree(t *testing.T, c schemaCase, s *jsonschema.Schema, what string, tree any) {
	t.Helper()
	data, err := yaml.Marshal(tree)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(tree)
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	parseErr, schemaErr := c.parse(data), s.Validate(inst)
	if (parseErr == nil) != (schemaErr == nil) {
		t.Errorf("%s, %s: the parser says %v, the schema %v\n%s", c.kind, what, parseErr, schemaErr, data)
	}
}

// TestSchemasAgreeWithTheParser: `launcher schema` of each kind accepts
// every example and, on mutations of them — a key added to every mapping,
// every value replaced by one of another type, every key deleted, and the
// parser's own checks (names, ranges, quantities, enums, rules between
// fields) — rejects exactly what the strict parser rejects.
func TestSchemasAgreeWithTheParser(t *testing.T) {
	for _, c := range schemaCases {
		s := compile(t, c.kind)
		for _, example := range c.examples {
			raw, err := os.ReadFile(example)
			if err != nil {
				t.Fatal(err)
			}
			var tree any
			if err := yaml.Unmarshal(raw, &tree); err != nil {
				t.Fatal(err)
			}
			name := filepath.Base(example)
			if err := c.parse(raw); err != nil {
				t.Fatalf("%s does not parse: %v", name, err)
			}
			agree(t, c, s, name, tree)
			n := 0
			walk(tree, "", func(path string, v any) {
				switch v := v.(type) {
				case map[string]any:
					n++
					agree(t, c, s, name+": a key added at "+path, set(tree, join(path, "zzUnknownKey"), map[string]any{"x": 1}))
					if path != "" {
						n++
						agree(t, c, s, name+": "+path+" empty (null)", set(tree, path, null{}))
					}
				case []any:
					if path != "" {
						n++
						agree(t, c, s, name+": "+path+" empty (null)", set(tree, path, null{}))
					}
				default:
					n += 2
					agree(t, c, s, name+": "+path+" a mapping", set(tree, path, map[string]any{"x": 1}))
					if _, isString := v.(string); !isString {
						agree(t, c, s, name+": "+path+" a string", set(tree, path, "zz-not-a-number"))
					}
				}
				if path != "" {
					n++
					agree(t, c, s, name+": "+path+" deleted", set(tree, path, nil))
				}
			})
			for _, m := range c.mutations {
				changed := tree
				keys := slices.Sorted(func(yield func(string) bool) {
					for k := range m {
						if !yield(k) {
							return
						}
					}
				})
				for _, k := range keys {
					changed = set(changed, k, m[k])
				}
				n++
				agree(t, c, s, fmt.Sprintf("%s: %v", name, m), changed)
			}
			t.Logf("%s %s: %d mutations judged alike", c.kind, name, n)
		}
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// walk calls fn on every node of a JSON tree with its dotted path (list
// items as [i]).
func walk(v any, path string, fn func(string, any)) {
	fn(path, v)
	switch v := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range v {
				if !yield(k) {
					return
				}
			}
		}) {
			walk(v[k], join(path, k), fn)
		}
	case []any:
		for i, item := range v {
			walk(item, fmt.Sprintf("%s[%d]", path, i), fn)
		}
	}
}

// null is the value YAML writes as an empty value or ~.
type null struct{}

// set returns a copy of tree with the value at path replaced (nil
// deletes it, null{} makes it null), making the mappings on the way.
func set(tree any, path string, value any) any {
	if _, ok := value.(null); ok {
		return setNull(tree, path)
	}
	var clone any
	raw, _ := json.Marshal(tree)
	_ = json.Unmarshal(raw, &clone)
	parts := splitPath(path)
	cur := clone
	for i, p := range parts {
		last := i == len(parts)-1
		switch node := cur.(type) {
		case map[string]any:
			if last {
				if value == nil {
					delete(node, p)
				} else {
					node[p] = value
				}
				return clone
			}
			next, ok := node[p]
			if !ok || next == nil {
				next = map[string]any{}
				node[p] = next
			}
			cur = next
		case []any:
			var idx int
			fmt.Sscanf(p, "[%d]", &idx)
			if last {
				if value == nil {
					node[idx] = map[string]any{}
				} else {
					node[idx] = value
				}
				return clone
			}
			cur = node[idx]
		default:
			return clone
		}
	}
	return clone
}

func splitPath(path string) []string {
	var out []string
	for _, p := range strings.Split(path, ".") {
		if i := strings.Index(p, "["); i > 0 {
			out = append(out, p[:i])
			p = p[i:]
		}
		for strings.HasPrefix(p, "[") {
			j := strings.Index(p, "]")
			out = append(out, p[:j+1])
			p = p[j+1:]
		}
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}

// setNull sets the value at path to null.
func setNull(tree any, path string) any {
	marker := "zz-null-marker"
	out := set(tree, path, marker)
	raw, _ := json.Marshal(out)
	var clone any
	_ = json.Unmarshal(bytes.ReplaceAll(raw, []byte(`"`+marker+`"`), []byte("null")), &clone)
	return clone
}
