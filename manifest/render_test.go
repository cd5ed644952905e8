package manifest_test

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"gotest.tools/v3/golden"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"gridweave.dev/manifest"
	"gridweave.dev/manifest/validation"
)

const specs = "../examples/launcher/specs"

func render(t testing.TB, recipe, infra string) []*unstructured.Unstructured {
	t.Helper()
	r, err := manifest.LoadRecipe(filepath.Join(specs, recipe))
	if err != nil {
		t.Fatal(err)
	}
	in, err := manifest.LoadInfra(filepath.Join(specs, infra))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifest.Render(r, in)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// TestRenderGolden pins the bytes of every example render (update with
// go test ./manifest/ -update) and checks render → parse → render gives the
// same bytes.
func TestRenderGolden(t *testing.T) {
	for _, c := range []struct{ recipe, infra, golden string }{
		{"grpo_swe.recipe.yaml", "grpo_swe.infra.yaml", "grpo_swe.vllm.rayjob.yaml"},
		{"grpo_swe.recipe.yaml", "grpo_swe_sglang.infra.yaml", "grpo_swe.sglang.bringup.yaml"},
	} {
		t.Run(c.golden, func(t *testing.T) {
			objs := render(t, c.recipe, c.infra)
			out, err := manifest.Marshal(objs)
			if err != nil {
				t.Fatal(err)
			}
			golden.Assert(t, string(out), c.golden)

			// Idempotence: parse the stream back and marshal it again.
			var back []*unstructured.Unstructured
			for _, doc := range strings.Split(string(out), "---\n") {
				u := &unstructured.Unstructured{}
				if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
					t.Fatal(err)
				}
				back = append(back, u)
			}
			again, err := manifest.Marshal(back)
			if err != nil || !bytes.Equal(again, out) {
				t.Fatalf("render → parse → render differs (%v)", err)
			}
			// And rendering twice gives the same bytes.
			twice, _ := manifest.Marshal(render(t, c.recipe, c.infra))
			if !bytes.Equal(twice, out) {
				t.Fatal("two renders differ")
			}
		})
	}
}

func TestRenderOrderAndInvariants(t *testing.T) {
	objs := render(t, "grpo_swe.recipe.yaml", "grpo_swe_sglang.infra.yaml")
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetKind())
	}
	want := "ResourceQuota LimitRange Deployment Service NetworkPolicy PodDisruptionBudget PodDisruptionBudget NetworkPolicy RayCluster"
	if strings.Join(kinds, " ") != want {
		t.Fatalf("order %v, want %s", kinds, want)
	}
	rc := objs[len(objs)-1]
	groups, _, _ := unstructured.NestedSlice(rc.Object, "spec", "workerGroupSpecs")
	if len(groups) != 2 {
		t.Fatalf("%d worker groups", len(groups))
	}
	for _, g := range groups {
		gm := g.(map[string]any)
		role := gm["groupName"].(string)
		res, _, _ := unstructured.NestedString(gm, "rayStartParams", "resources")
		if res != `'{"dockyard_fleet_`+role+`":8}'` {
			t.Errorf("group %s resources %q", role, res)
		}
		ctrs, _, _ := unstructured.NestedSlice(gm, "template", "spec", "containers")
		env := map[string]string{}
		for _, e := range ctrs[0].(map[string]any)["env"].([]any) {
			em := e.(map[string]any)
			env[em["name"].(string)] = em["value"].(string)
		}
		if env["DOCKYARD_FLEET_ROLE"] != role || env["RAY_ENABLE_UV_RUN_RUNTIME_ENV"] != "0" ||
			env["DOCKYARD_SANDBOX_URLS"] != "http://grpo-swe-sandbox.dockyard-sglang.svc.cluster.local:9090" {
			t.Errorf("group %s env %v", role, env)
		}
		if img := ctrs[0].(map[string]any)["image"]; img != "ghcr.io/dockyard/ubuntu-swe:sglang-2026.11" {
			t.Errorf("group %s image %v", role, img)
		}
	}
	if st, _, _ := unstructured.NestedString(rc.Object, "spec", "headGroupSpec", "serviceType"); st != "ClusterIP" {
		t.Errorf("kuberay.spec override not merged: serviceType %q", st)
	}
}

func TestAttachRendersNoRay(t *testing.T) {
	r, _ := manifest.LoadRecipe(filepath.Join(specs, "grpo_swe.recipe.yaml"))
	in, err := manifest.ParseInfra("inline", []byte("namespace: x\nlaunch: {mode: attach}\nsandbox: {image: exec:1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifest.Render(r, in)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetAPIVersion() == "ray.io/v1" {
			t.Fatalf("attach rendered %s", o.GetKind())
		}
	}
	if len(objs) != 4 {
		t.Fatalf("attach rendered %d objects, want the 4 sandbox objects", len(objs))
	}
}

func TestSpecErrorsNamePathAndLine(t *testing.T) {
	for _, c := range []struct {
		name, doc string
		infra     bool
		path      string
		line      int
		says      string
	}{
		{"unknown field", "name: a\nentrypoint: x\nfleets: {t: {replicas: 1}}\ninference: {backend: vllm}\noverides: []\n", false, "overides", 5, `did you mean "overrides"`},
		{"nested unknown", "name: a\nentrypoint: x\nfleets:\n  t:\n    replicas: 1\n    gpus: 8\ninference: {backend: vllm}\n", false, "fleets.t.gpus", 6, "unknown field"},
		{"wrong type", "name: a\nentrypoint: x\nfleets:\n  t:\n    replicas: many\ninference: {backend: vllm}\n", false, "fleets.t.replicas", 5, "want an integer"},
		{"bad mode", "namespace: ns\nimages: {vllm: x}\nlaunch: {mode: yolo}\n", true, "launch.mode", 0, "rayjob, bringup or attach"},
		{"typo in kuberay.spec", "namespace: ns\nimages: {vllm: x}\nlaunch: {mode: rayjob}\nkuberay:\n  spec:\n    headGroupSpec:\n      serviceTyp: ClusterIP\n", true, "kuberay.spec.headGroupSpec.serviceTyp", 7, `did you mean "serviceType"`},
		{"typo in topology spread", "namespace: ns\nimages: {vllm: x}\nlaunch: {mode: rayjob}\nsandbox:\n  topologySpreadConstraints:\n  - maxSkew: 1\n    topologyKy: zone\n", true, "sandbox.topologySpreadConstraints[0].topologyKy", 7, "topologyKey"},
		{"bad quantity", "namespace: ns\nimages: {vllm: x}\nlaunch: {mode: rayjob}\nsandbox: {resources: {cpu: lots}}\n", true, "sandbox.resources.cpu", 0, "not a quantity"},
		{"negative minAvailable", "namespace: ns\nimages: {vllm: x}\nlaunch: {mode: bringup}\nkuberay: {pdb: {enabled: true, minAvailable: -1}}\n", true, "kuberay.pdb.minAvailable", 0, "must not be negative"},
		{"minAvailable and maxUnavailable", "namespace: ns\nimages: {vllm: x}\nlaunch: {mode: bringup}\nkuberay: {pdb: {enabled: true, minAvailable: 2, maxUnavailable: 1}}\n", true, "kuberay.pdb.minAvailable", 0, "not both"},
		{"sandbox minAvailable", "namespace: ns\nimages: {vllm: x}\nlaunch: {mode: rayjob}\nsandbox: {pdb: {minAvailable: 1}}\n", true, "sandbox.pdb.minAvailable", 0, "only kuberay.pdb"},
		{"bad cidr", "namespace: ns\nimages: {vllm: x}\nlaunch: {mode: rayjob}\nsandbox: {networkPolicy: {allowedEgressCidrs: [nope]}}\n", true, "sandbox.networkPolicy.allowedEgressCidrs[0]", 0, "not a CIDR"},
		{"egress CIDRs with egress open", "namespace: ns\nimages: {vllm: x}\nlaunch: {mode: rayjob}\nsandbox: {networkPolicy: {allowEgress: true, allowedEgressCidrs: [10.0.0.0/8]}}\n", true, "sandbox.networkPolicy.allowedEgressCidrs", 0, "allowEgress: true"},
		{"egress CIDRs without a policy", "namespace: ns\nimages: {vllm: x}\nlaunch: {mode: rayjob}\nsandbox: {networkPolicy: {enabled: false, allowedEgressCidrs: [10.0.0.0/8]}}\n", true, "sandbox.networkPolicy.allowedEgressCidrs", 0, "enabled is false"},
		{"duplicate key", "namespace: ns\nnamespace: ns2\n", true, "namespace", 2, "appears twice"},
		{"not yaml", "a: [1, 2\n", true, "", 0, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var err error
			if c.infra {
				_, err = manifest.ParseInfra("spec.yaml", []byte(c.doc))
			} else {
				_, err = manifest.ParseRecipe("spec.yaml", []byte(c.doc))
			}
			var se *manifest.SpecError
			if !errors.As(err, &se) || !errors.Is(err, manifest.ErrSpec) {
				t.Fatalf("error %v, want a *SpecError", err)
			}
			if se.Path != c.path || (c.line != 0 && se.Line != c.line) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("error %q (path %q line %d); want path %q line %d saying %q", err, se.Path, se.Line, c.path, c.line, c.says)
			}
		})
	}
}

func FuzzParseInfra(f *testing.F) {
	for _, seed := range []string{"namespace: ns\nlaunch: {mode: rayjob}\nimages: {vllm: x}\n", "sandbox: {replicas: -1}", "kuberay: {spec: {workerGroupSpecs: [{groupName: 1}]}}", "[]", "a: &x [*x]"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := manifest.ParseInfra("fuzz.yaml", data)
		checkSpecError(t, err)
	})
}

func FuzzParseRecipe(f *testing.F) {
	f.Add([]byte("name: a\nentrypoint: x\nfleets: {t: {replicas: 1}}\ninference: {backend: vllm}\n"))
	f.Add([]byte("fleets: {T: {replicas: 0}}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := manifest.ParseRecipe("fuzz.yaml", data)
		checkSpecError(t, err)
	})
}

func TestSandboxPiecesCanBeTurnedOff(t *testing.T) {
	r, _ := manifest.LoadRecipe(filepath.Join(specs, "grpo_swe.recipe.yaml"))
	kinds := func(infra string) string {
		in, err := manifest.ParseInfra("inline", []byte(infra))
		if err != nil {
			t.Fatal(err)
		}
		objs, err := manifest.Render(r, in)
		if err != nil {
			t.Fatal(err)
		}
		var ks []string
		for _, o := range objs {
			ks = append(ks, o.GetKind())
		}
		return strings.Join(ks, " ")
	}
	// (The GPU head's own NetworkPolicy off: these are the sandbox's.)
	base := "namespace: ns\nimages: {vllm: img}\nlaunch: {mode: bringup}\nkuberay: {headNetworkPolicy: {enabled: false}}\nsandbox:\n  image: exec:1\n"
	if got := kinds(base); got != "Deployment Service NetworkPolicy PodDisruptionBudget RayCluster" {
		t.Errorf("defaults: %s", got)
	}
	if got := kinds(base + "  networkPolicy: {enabled: false}\n  pdb: {enabled: false}\n"); got != "Deployment Service RayCluster" {
		t.Errorf("policy and PDB off: %s", got)
	}
	if got := kinds("namespace: ns\nimages: {vllm: img}\nlaunch: {mode: bringup}\nkuberay: {headNetworkPolicy: {enabled: false}}\nsandbox: {enabled: false, image: exec:1}\n"); got != "RayCluster" {
		t.Errorf("sandbox off: %s", got)
	}
	in, _ := manifest.ParseInfra("inline", []byte(base+"  security: {enabled: false}\n"))
	objs, _ := manifest.Render(r, in)
	if strings.Contains(fmt.Sprint(objs[0].Object), "allowPrivilegeEscalation") {
		t.Error("security: {enabled: false} kept the securityContext")
	}
}

// checkSpecError requires a parse error to be a *SpecError that points at
// a field path or, for YAML syntax, a line.
func checkSpecError(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	var se *manifest.SpecError
	if !errors.As(err, &se) {
		t.Fatalf("error %v is not a *SpecError", err)
	}
	if se.Path == "" && se.Line == 0 && se.Problem != "the file is empty" {
		t.Fatalf("error %q names neither a path nor a line", err)
	}
}

// TestRayDisruptionBudgetIsAnIntegerMinAvailable: a budget over Ray pods
// can only be an integer minAvailable (a RayCluster has no scale
// subresource); by default all pods but maxUnavailable, or as set.
func TestRayDisruptionBudgetIsAnIntegerMinAvailable(t *testing.T) {
	r, _ := manifest.LoadRecipe(filepath.Join(specs, "grpo_swe.recipe.yaml"))
	for _, c := range []struct {
		pdb  string
		want int64
	}{
		{"{enabled: true}", 2}, // head + trainer + inference, less 1
		{"{enabled: true, maxUnavailable: 2}", 1},
		{"{enabled: true, minAvailable: 3}", 3},
	} {
		in, err := manifest.ParseInfra("inline", []byte("namespace: x\nimages: {vllm: v:1}\nlaunch: {mode: bringup}\nkuberay: {pdb: "+c.pdb+"}\n"))
		if err != nil {
			t.Fatal(err)
		}
		objs, err := manifest.Render(r, in)
		if err != nil {
			t.Fatal(err)
		}
		var found bool
		for _, o := range objs {
			if o.GetKind() != "PodDisruptionBudget" || o.GetName() != "grpo-swe-ray" {
				continue
			}
			found = true
			min, _, _ := unstructured.NestedInt64(o.Object, "spec", "minAvailable")
			if _, has, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "maxUnavailable"); has || min != c.want {
				t.Errorf("%s: spec %v, want minAvailable %d only", c.pdb, o.Object["spec"], c.want)
			}
		}
		if !found {
			t.Errorf("%s: no Ray budget rendered", c.pdb)
		}
	}
}

// TestRenderedLaunchesLint: what `launcher check` does — render, then
// lint — finds no error in the example launches.
func TestRenderedLaunchesLint(t *testing.T) {
	for _, c := range [][2]string{{"grpo_swe.recipe.yaml", "grpo_swe.infra.yaml"}, {"grpo_swe.recipe.yaml", "grpo_swe_sglang.infra.yaml"}} {
		objs := render(t, c[0], c[1])
		var docs []validation.Document
		for i, o := range objs {
			docs = append(docs, validation.Document{Source: fmt.Sprintf("render#%d", i+1), Object: o})
		}
		for _, f := range validation.Lint(validator, docs) {
			if f.Severity == validation.SeverityError {
				t.Errorf("%s: rendered output has an error: %s", c[1], f)
			}
		}
	}
}

func TestRenderedFleetsAnnounceTheirTags(t *testing.T) {
	objs := render(t, "grpo_swe.recipe.yaml", "grpo_swe.infra.yaml")
	job := objs[len(objs)-1]
	var rj rayv1.RayJob
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(job.Object, &rj); err != nil {
		t.Fatal(err)
	}
	got, err := validation.ComputeStartResources(rj.Name, rj.Spec.RayClusterSpec)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range got {
		switch g.Group {
		case "trainer", "inference":
			if *g.GPU != 8 || *g.CPU != 32 || g.Custom["dockyard_fleet_"+g.Group] != 8 {
				t.Errorf("%s", g)
			}
		case "head":
			if *g.GPU != 0 {
				t.Errorf("head %s", g)
			}
		}
	}
}

// TestEgressCIDRsLimitEgressWhenGiven: allowedEgressCidrs limit the
// sandbox's egress to them and DNS whether or not allowEgress says false;
// without them (and without allowEgress: false) egress stays open.
func TestEgressCIDRsLimitEgressWhenGiven(t *testing.T) {
	r, _ := manifest.LoadRecipe(filepath.Join(specs, "grpo_swe.recipe.yaml"))
	egress := func(policy string) (types []string, rules []string) {
		t.Helper()
		in, err := manifest.ParseInfra("inline", []byte("namespace: ns\nimages: {vllm: img}\nlaunch: {mode: bringup}\nsandbox:\n  image: exec:1\n  networkPolicy: "+policy+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		objs, err := manifest.Render(r, in)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if o.GetKind() != "NetworkPolicy" {
				continue
			}
			ts, _, _ := unstructured.NestedStringSlice(o.Object, "spec", "policyTypes")
			es, _, _ := unstructured.NestedSlice(o.Object, "spec", "egress")
			for _, e := range es {
				rules = append(rules, fmt.Sprint(e))
			}
			return ts, rules
		}
		t.Fatal("no NetworkPolicy")
		return nil, nil
	}
	for _, c := range []struct {
		policy       string
		limited      bool
		cidrRule     bool
		wantRuleSize int
	}{
		{"{}", false, false, 0},
		{"{allowEgress: false}", true, false, 1},
		{"{allowedEgressCidrs: [198.18.200.0/24]}", true, true, 2},
		{"{allowEgress: false, allowedEgressCidrs: [198.18.200.0/24]}", true, true, 2},
	} {
		types, rules := egress(c.policy)
		if slices.Contains(types, "Egress") != c.limited || len(rules) != c.wantRuleSize ||
			c.cidrRule != strings.Contains(strings.Join(rules, " "), "198.18.200.0/24") {
			t.Errorf("%s: policy types %v, egress rules %v", c.policy, types, rules)
		}
	}
}

// TestGPUSecurityDropsEveryCapability: infra.security drops every Linux
// capability from the Ray containers, adding back only what a named
// option asks for (ipcLock: IPC_LOCK, for RDMA).
func TestGPUSecurityDropsEveryCapability(t *testing.T) {
	r, _ := manifest.LoadRecipe(filepath.Join(specs, "grpo_swe.recipe.yaml"))
	for _, c := range []struct {
		security string
		add      []any
	}{
		{"{enabled: true}", nil},
		{"{enabled: true, runAsNonRoot: true, ipcLock: true}", []any{"IPC_LOCK"}},
	} {
		in, err := manifest.ParseInfra("inline", []byte("namespace: ns\nimages: {vllm: img}\nlaunch: {mode: bringup}\nsandbox: {enabled: false}\ninfra: {security: "+c.security+"}\n"))
		if err != nil {
			t.Fatal(err)
		}
		objs, err := manifest.Render(r, in)
		if err != nil {
			t.Fatal(err)
		}
		containers := 0
		for _, o := range objs {
			if o.GetKind() != "RayCluster" {
				continue
			}
			head, _, _ := unstructured.NestedSlice(o.Object, "spec", "headGroupSpec", "template", "spec", "containers")
			groups, _, _ := unstructured.NestedSlice(o.Object, "spec", "workerGroupSpecs")
			all := head
			for _, g := range groups {
				cs, _, _ := unstructured.NestedSlice(g.(map[string]any), "template", "spec", "containers")
				all = append(all, cs...)
			}
			for _, ctr := range all {
				containers++
				drop, _, _ := unstructured.NestedSlice(ctr.(map[string]any), "securityContext", "capabilities", "drop")
				add, _, _ := unstructured.NestedSlice(ctr.(map[string]any), "securityContext", "capabilities", "add")
				if !slices.Equal(drop, []any{"ALL"}) || !slices.Equal(add, c.add) {
					t.Errorf("%s: container %v drops %v and adds %v", c.security, ctr.(map[string]any)["name"], drop, add)
				}
			}
		}
		if containers < 3 {
			t.Errorf("%s: %d Ray containers", c.security, containers)
		}
	}
}

// TestRayJobRetriesAndDeadline: launch.backoffLimit,
// activeDeadlineSeconds, submitterConfig.backoffLimit and submissionMode
// reach the RayJob,
// which lints clean against KubeRay's CRD; a bad value names its field,
// and they need launch.mode rayjob.
func TestRayJobRetriesAndDeadline(t *testing.T) {
	r, _ := manifest.LoadRecipe(filepath.Join(specs, "grpo_swe.recipe.yaml"))
	in, err := manifest.ParseInfra("inline", []byte("namespace: ns\nimages: {vllm: img}\nsandbox: {enabled: false}\n"+
		"launch: {mode: rayjob, backoffLimit: 2, activeDeadlineSeconds: 7200, submitterConfig: {backoffLimit: 4}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifest.Render(r, in)
	if err != nil {
		t.Fatal(err)
	}
	var job *unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "RayJob" {
			job = o
		}
	}
	if job == nil {
		t.Fatal("no RayJob")
	}
	if mode, _, _ := unstructured.NestedString(job.Object, "spec", "submissionMode"); mode != "" {
		t.Errorf("spec.submissionMode = %q, want KubeRay's default (none given)", mode)
	}
	for path, want := range map[string]int64{"backoffLimit": 2, "activeDeadlineSeconds": 7200, "submitterConfig.backoffLimit": 4} {
		got, _, _ := unstructured.NestedInt64(job.Object, append([]string{"spec"}, strings.Split(path, ".")...)...)
		if got != want {
			t.Errorf("spec.%s = %d, want %d", path, got, want)
		}
	}
	data, err := manifest.Marshal([]*unstructured.Unstructured{job})
	if err != nil {
		t.Fatal(err)
	}
	docs, err := validation.ReadDocuments("job.yaml", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range validation.Lint(validation.NewValidator(), docs) {
		if f.Severity == validation.SeverityError {
			t.Errorf("the RayJob does not lint clean: %s", f)
		}
	}
	for doc, path := range map[string]string{
		"launch: {mode: rayjob, backoffLimit: -1}":                                                "launch.backoffLimit",
		"launch: {mode: rayjob, activeDeadlineSeconds: 0}":                                        "launch.activeDeadlineSeconds",
		"launch: {mode: rayjob, submitterConfig: {backoffLimit: -2}}":                             "launch.submitterConfig.backoffLimit",
		"launch: {mode: bringup, backoffLimit: 1}":                                                "launch.mode",
		"launch: {mode: rayjob, submissionMode: sidecar}":                                         "launch.submissionMode",
		"launch: {mode: rayjob, submissionMode: SidecarMode, submitterConfig: {backoffLimit: 1}}": "launch.submitterConfig",
		"launch: {mode: bringup, submissionMode: HTTPMode}":                                       "launch.mode",
	} {
		_, err := manifest.ParseInfra("inline", []byte("namespace: ns\nimages: {vllm: img}\n"+doc+"\n"))
		var se *manifest.SpecError
		if !errors.As(err, &se) || se.Path != path {
			t.Errorf("%s: %v, want an error at %s", doc, err, path)
		}
	}
}

// TestKubeRaySpecMergesWorkerGroupsByName: a kuberay.spec override of one
// worker group (by groupName) changes that group only, and of one
// container (by name) that container only, as Kubernetes' strategic merge
// does; a group with a new name is added.
func TestKubeRaySpecMergesWorkerGroupsByName(t *testing.T) {
	r, _ := manifest.LoadRecipe(filepath.Join(specs, "grpo_swe.recipe.yaml"))
	in, err := manifest.ParseInfra("inline", []byte(`namespace: ns
images: {vllm: img}
launch: {mode: bringup}
sandbox: {enabled: false}
kuberay:
  spec:
    workerGroupSpecs:
    - groupName: trainer
      minReplicas: 0
      template:
        spec:
          containers:
          - name: ray-worker
            env:
            - {name: NCCL_DEBUG, value: INFO}
    - groupName: eval
      replicas: 1
      rayStartParams: {}
      template: {spec: {containers: [{name: ray-worker, image: img}]}}
`))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifest.Render(r, in)
	if err != nil {
		t.Fatal(err)
	}
	groups := map[string]map[string]any{}
	for _, o := range objs {
		if o.GetKind() == "RayCluster" {
			list, _, _ := unstructured.NestedSlice(o.Object, "spec", "workerGroupSpecs")
			for _, g := range list {
				groups[g.(map[string]any)["groupName"].(string)] = g.(map[string]any)
			}
		}
	}
	if len(groups) != 3 || groups["inference"] == nil || groups["eval"] == nil {
		t.Fatalf("groups %v, want inference and trainer kept, eval added", slices.Sorted(maps.Keys(groups)))
	}
	trainer := groups["trainer"]
	min, _, _ := unstructured.NestedInt64(trainer, "minReplicas")
	containers, _, _ := unstructured.NestedSlice(trainer, "template", "spec", "containers")
	if min != 0 || len(containers) != 1 {
		t.Fatalf("trainer: minReplicas %d, %d containers", min, len(containers))
	}
	c := containers[0].(map[string]any)
	env := fmt.Sprint(c["env"])
	if c["image"] != "img" || !strings.Contains(env, "NCCL_DEBUG") || !strings.Contains(env, "DOCKYARD_FLEET_ROLE") {
		t.Errorf("trainer's container lost what the override did not name: image %v, env %s", c["image"], env)
	}
	if _, ok := trainer["rayStartParams"].(map[string]any)["resources"]; !ok {
		t.Error("trainer lost its rayStartParams")
	}
}

// TestFleetAutoscaling: a fleet with minReplicas or maxReplicas turns on
// KubeRay's in-tree autoscaler (v2) with the group's bounds; the cluster
// lints clean (no autoscaler warning); bounds around replicas are checked.
func TestFleetAutoscaling(t *testing.T) {
	recipe := func(fleet string) *manifest.Recipe {
		t.Helper()
		r, err := manifest.ParseRecipe("inline", []byte("name: auto\nentrypoint: python train.py\ninference: {backend: vllm}\nfleets:\n  trainer: {replicas: 2, gpusPerNode: 8}\n  rollout: "+fleet+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	in, err := manifest.ParseInfra("inline", []byte("namespace: ns\nimages: {vllm: img}\nlaunch: {mode: bringup}\nsandbox: {enabled: false}\n"))
	if err != nil {
		t.Fatal(err)
	}
	cluster := func(r *manifest.Recipe) *unstructured.Unstructured {
		t.Helper()
		objs, err := manifest.Render(r, in)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if o.GetKind() == "RayCluster" {
				return o
			}
		}
		t.Fatal("no RayCluster")
		return nil
	}
	fixed := cluster(recipe("{replicas: 1, gpusPerNode: 1}"))
	if on, _, _ := unstructured.NestedBool(fixed.Object, "spec", "enableInTreeAutoscaling"); on {
		t.Error("fixed fleets turned the autoscaler on")
	}
	auto := cluster(recipe("{replicas: 1, minReplicas: 0, maxReplicas: 6, gpusPerNode: 1}"))
	on, _, _ := unstructured.NestedBool(auto.Object, "spec", "enableInTreeAutoscaling")
	version, _, _ := unstructured.NestedString(auto.Object, "spec", "autoscalerOptions", "version")
	if !on || version != "v2" {
		t.Errorf("autoscaled: enableInTreeAutoscaling %v, autoscaler version %q", on, version)
	}
	groups, _, _ := unstructured.NestedSlice(auto.Object, "spec", "workerGroupSpecs")
	bounds := map[string][3]int64{}
	for _, g := range groups {
		gm := g.(map[string]any)
		r, _, _ := unstructured.NestedInt64(gm, "replicas")
		lo, _, _ := unstructured.NestedInt64(gm, "minReplicas")
		hi, _, _ := unstructured.NestedInt64(gm, "maxReplicas")
		bounds[gm["groupName"].(string)] = [3]int64{lo, r, hi}
	}
	if bounds["rollout"] != [3]int64{0, 1, 6} || bounds["trainer"] != [3]int64{2, 2, 2} {
		t.Errorf("group bounds (min, replicas, max): %v", bounds)
	}
	data, _ := manifest.Marshal([]*unstructured.Unstructured{auto})
	docs, _ := validation.ReadDocuments("auto.yaml", bytes.NewReader(data))
	for _, f := range validation.Lint(validation.NewValidator(), docs) {
		t.Errorf("the autoscaled cluster does not lint clean: %s", f)
	}
	for fleet, path := range map[string]string{
		"{replicas: 2, minReplicas: 3}":  "fleets.rollout.minReplicas",
		"{replicas: 2, minReplicas: -1}": "fleets.rollout.minReplicas",
		"{replicas: 2, maxReplicas: 1}":  "fleets.rollout.maxReplicas",
	} {
		_, err := manifest.ParseRecipe("inline", []byte("name: auto\nentrypoint: x\ninference: {backend: vllm}\nfleets:\n  rollout: "+fleet+"\n"))
		var se *manifest.SpecError
		if !errors.As(err, &se) || se.Path != path {
			t.Errorf("%s: %v, want an error at %s", fleet, err, path)
		}
	}
}

// TestGPUClustersHeadIsScopedAndAuthenticated: a cluster with GPU fleets
// gets its head's NetworkPolicy (the client port from the namespaces and
// pods named only) and token authentication, each of which the spec can
// turn off; a CPU-only cluster, or a Ray too old for tokens, gets
// neither.
func TestGPUClustersHeadIsScopedAndAuthenticated(t *testing.T) {
	recipeText := readFile(t, filepath.Join(specs, "grpo_swe.recipe.yaml"))
	gpu, err := manifest.ParseRecipe("gpu.yaml", []byte(recipeText))
	if err != nil {
		t.Fatal(err)
	}
	cpu, err := manifest.ParseRecipe("cpu.yaml", []byte(strings.ReplaceAll(recipeText, "gpusPerNode: 8", "gpusPerNode: 0")))
	if err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		policy *unstructured.Unstructured
		auth   string
	}
	render := func(r *manifest.Recipe, infra string) outcome {
		t.Helper()
		in, err := manifest.ParseInfra("inline", []byte("namespace: ns\nimages: {vllm: img}\nlaunch: {mode: bringup}\nsandbox: {enabled: false, image: e}\n"+infra))
		if err != nil {
			t.Fatal(err)
		}
		objs, err := manifest.Render(r, in)
		if err != nil {
			t.Fatal(err)
		}
		var o outcome
		for _, obj := range objs {
			switch obj.GetKind() {
			case "NetworkPolicy":
				o.policy = obj
			case "RayCluster":
				o.auth, _, _ = unstructured.NestedString(obj.Object, "spec", "authOptions", "mode")
			}
		}
		return o
	}
	o := render(gpu, "kuberay:\n  headNetworkPolicy: {clientNamespaces: [notebooks]}\n")
	if o.policy == nil || o.policy.GetName() != "grpo-swe-head" || o.auth != "token" {
		t.Fatalf("a GPU cluster: policy %v, auth %q", o.policy, o.auth)
	}
	selector, _, _ := unstructured.NestedStringMap(o.policy.Object, "spec", "podSelector", "matchLabels")
	rules, _, _ := unstructured.NestedSlice(o.policy.Object, "spec", "ingress")
	if selector["ray.io/node-type"] != "head" || selector["app.kubernetes.io/instance"] != "grpo-swe" || len(rules) != 3 ||
		!strings.Contains(fmt.Sprint(rules[2]), "notebooks") || !strings.Contains(fmt.Sprint(rules[2]), "10001") || strings.Contains(fmt.Sprint(rules[1]), "10001") {
		t.Errorf("the head's policy selects %v with rules %v", selector, rules)
	}
	if o := render(gpu, ""); o.policy == nil || len(mustSlice(o.policy, "spec", "ingress")) != 2 {
		t.Errorf("no clients named: the client port is the cluster's own pods' alone, want two rules: %v", o.policy)
	}
	if o := render(gpu, "kuberay:\n  headNetworkPolicy: {enabled: false}\n  spec: {authOptions: {mode: disabled}}\n"); o.policy != nil || o.auth != "disabled" {
		t.Errorf("both turned off: policy %v, auth %q", o.policy, o.auth)
	}
	if o := render(gpu, "kuberay: {rayVersion: \"2.50.0\"}\n"); o.auth != "" {
		t.Errorf("Ray 2.50 takes no token, yet auth %q", o.auth)
	}
	if o := render(gpu, "kuberay: {spec: {rayVersion: \"2.50.0\"}}\n"); o.auth != "" {
		t.Errorf("kuberay.spec's Ray 2.50 takes no token, yet auth %q", o.auth)
	}
	// A group kuberay.spec adds carries the labels the head's policy lets in.
	in, err := manifest.ParseInfra("inline", []byte("namespace: ns\nimages: {vllm: img}\nlaunch: {mode: bringup}\nsandbox: {enabled: false, image: e}\n"+
		"kuberay:\n  spec:\n    workerGroupSpecs:\n    - groupName: extra\n      template: {spec: {containers: [{name: ray-worker, image: img}]}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifest.Render(gpu, in)
	if err != nil {
		t.Fatal(err)
	}
	groups := mustSlice(objs[len(objs)-1], "spec", "workerGroupSpecs")
	for _, g := range groups {
		labels, _, _ := unstructured.NestedStringMap(g.(map[string]any), "template", "metadata", "labels")
		if labels["app.kubernetes.io/instance"] != "grpo-swe" || labels["app.kubernetes.io/component"] != "ray" {
			t.Errorf("group %v has labels %v: the head's policy keeps it out", g.(map[string]any)["groupName"], labels)
		}
	}
	if len(groups) != 3 {
		t.Errorf("%d groups, want the recipe's two and kuberay.spec's", len(groups))
	}
	if o := render(cpu, ""); o.policy != nil || o.auth != "" {
		t.Errorf("a CPU-only cluster: policy %v, auth %q", o.policy, o.auth)
	}
	if _, err := manifest.ParseInfra("inline", []byte("namespace: ns\nimages: {vllm: img}\nlaunch: {mode: bringup}\nkuberay: {headNetworkPolicy: {clientNamespaces: [Bad_NS]}}\n")); err == nil || !strings.Contains(err.Error(), "kuberay.headNetworkPolicy.clientNamespaces[0]") {
		t.Errorf("a bad client namespace: %v", err)
	}
}
