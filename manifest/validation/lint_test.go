package validation_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gotest.tools/v3/golden"
	"k8s.io/apimachinery/pkg/api/equality"

	"gridweave.dev/manifest/validation"
)

var validator = validation.NewValidator()

// specs are the launcher's example specs.
const specs = "../../examples/launcher/specs"

func lintString(t testing.TB, doc string) []validation.Finding {
	t.Helper()
	docs, err := validation.ReadDocuments("case.yaml", strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	return validation.Lint(validator, docs)
}

func TestLintAcceptsTheExamples(t *testing.T) {
	f, err := os.Open(filepath.Join(specs, "ray-cpu-demo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	docs, _ := validation.ReadDocuments("ray-cpu-demo.yaml", f)
	if fs := validation.Lint(validator, docs); len(fs) != 0 {
		t.Errorf("the operator review's minimal CPU cluster: %v", fs)
	}
}

const rayCluster = `apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: %s
spec:
  rayVersion: "2.54.0"
  headGroupSpec:
    rayStartParams: {}
    template:
      spec:
        containers:
        - name: ray-head
          image: rayproject/ray:2.54.0
  workerGroupSpecs:
  - groupName: gpu
    replicas: 1
    minReplicas: 0
    maxReplicas: 2
    rayStartParams: {}
    template:
      spec:
        containers:
        - name: ray-worker
          image: rayproject/ray:2.54.0
          resources:
            limits: {nvidia.com/gpu: "1", cpu: "4", memory: 16Gi}
`

// TestLintFindsUsersMistakes feeds YAML with the mistakes users make and
// expects each to be reported at its field, with the right severity.
func TestLintFindsUsersMistakes(t *testing.T) {
	base := fmt.Sprintf(rayCluster, "demo")
	cases := []struct {
		name     string
		doc      string
		id, path string
		severity validation.Severity
	}{
		{"typo in a worker group", strings.Replace(base, "    replicas: 1\n", "    replica: 1\n", 1), "unknown-field", "spec.workerGroupSpecs[0].replica", validation.SeverityError},
		{"memory with a wrong unit", strings.Replace(base, "memory: 16Gi", "memory: 16GB", 1), "schema", "spec.workerGroupSpecs[0].template.spec.containers[0].resources.limits.memory", validation.SeverityError},
		{"a number where a string goes", strings.Replace(base, "  headGroupSpec:\n    rayStartParams: {}", "  headGroupSpec:\n    rayStartParams: {num-cpus: 0}", 1), "schema", "spec.headGroupSpec.rayStartParams.num-cpus", validation.SeverityError},
		{"CEL rule", strings.Replace(base, "spec:\n  rayVersion", "spec:\n  managedBy: someone-else\n  rayVersion", 1), "schema", "spec.managedBy", validation.SeverityError},
		{"uppercase name", fmt.Sprintf(rayCluster, "Demo"), "metadata", "metadata.name", validation.SeverityError},
		{"name too long", fmt.Sprintf(rayCluster, strings.Repeat("a", 54)), "name-too-long", "metadata.name", validation.SeverityError},
		{"container name", strings.Replace(base, "name: ray-worker", "name: Ray_Worker", 1), "container-name", "spec.workerGroupSpecs[0].template.spec.containers[0].name", validation.SeverityError},
		{"label value", strings.Replace(base, "    rayStartParams: {}\n    template:\n      spec:\n        containers:\n        - name: ray-worker", "    rayStartParams: {}\n    template:\n      metadata:\n        labels: {team: \"has space!\"}\n      spec:\n        containers:\n        - name: ray-worker", 1), "", "", ""},
		{"GPU only in requests", strings.Replace(base, "limits: {nvidia.com/gpu: \"1\", cpu: \"4\", memory: 16Gi}", "requests: {nvidia.com/gpu: \"1\"}", 1), "gpu-request-only", "spec.workerGroupSpecs[0].template.spec.containers[0].resources.limits", validation.SeverityError},
		{"resources in both places", strings.Replace(base, "    maxReplicas: 2\n    rayStartParams: {}", "    maxReplicas: 2\n    resources: {GPU: \"1\"}\n    rayStartParams: {num-gpus: \"1\"}", 1), "resources-and-start-params", "spec.workerGroupSpecs[0].rayStartParams.num-gpus", validation.SeverityError},
		{"GPUs Ray sees differ", strings.Replace(base, "    maxReplicas: 2\n    rayStartParams: {}", "    maxReplicas: 2\n    rayStartParams: {num-gpus: \"2\"}", 1), "gpu-mismatch", "spec.workerGroupSpecs[0]", validation.SeverityWarning},
		{"fractional CPU", strings.Replace(base, `cpu: "4"`, "cpu: 1500m", 1), "fractional-cpu", "spec.workerGroupSpecs[0].template.spec.containers[0].resources.limits.cpu", validation.SeverityWarning},
		{"rayVersion vs image", strings.Replace(base, `rayVersion: "2.54.0"`, `rayVersion: "2.50.0"`, 1), "ray-version-image", "spec.rayVersion", validation.SeverityWarning},
		{"replicas out of range", strings.Replace(base, "    replicas: 1\n", "    replicas: 5\n", 1), "replicas-out-of-range", "spec.workerGroupSpecs[0].replicas", validation.SeverityWarning},
		{"autoscaling without version", strings.Replace(base, "spec:\n  rayVersion", "spec:\n  enableInTreeAutoscaling: true\n  rayVersion", 1), "autoscaler-version", "spec.autoscalerOptions.version", validation.SeverityWarning},
		{"exposed head", strings.Replace(base, "  headGroupSpec:\n", "  headGroupSpec:\n    serviceType: LoadBalancer\n", 1), "exposed-dashboard", "spec.headGroupSpec.serviceType", validation.SeverityWarning},
		{"RayJob without cleanup", "apiVersion: ray.io/v1\nkind: RayJob\nmetadata: {name: job}\nspec:\n  entrypoint: python x.py\n  rayClusterSpec:\n" + indent(strings.SplitN(base, "spec:\n", 2)[1], "  "), "rayjob-no-cleanup", "spec.shutdownAfterJobFinishes", validation.SeverityWarning},
		{"mTLS of a later KubeRay", strings.Replace(base, "spec:\n  rayVersion", "spec:\n  tlsOptions: {enabled: true}\n  rayVersion", 1), "alpha-feature-gate", "spec.tlsOptions", validation.SeverityWarning},
		{"the operator's NetworkPolicy", "apiVersion: ray.io/v1\nkind: RayJob\nmetadata: {name: job}\nspec:\n  entrypoint: python x.py\n  rayClusterSpec:\n    networkPolicy: {mode: DenyAllIngress}\n" + indent(strings.SplitN(base, "spec:\n", 2)[1], "  "), "alpha-feature-gate", "spec.rayClusterSpec.networkPolicy", validation.SeverityWarning},
		{"the History Server's collector", strings.Replace(base, "spec:\n  rayVersion", "spec:\n  historyServerOptions: {}\n  rayVersion", 1), "alpha-feature-gate", "spec.historyServerOptions", validation.SeverityWarning},
		{"RayJob without bounds", "apiVersion: ray.io/v1\nkind: RayJob\nmetadata: {name: job}\nspec:\n  entrypoint: python x.py\n  shutdownAfterJobFinishes: true\n  rayClusterSpec:\n" + indent(strings.SplitN(base, "spec:\n", 2)[1], "  "), "rayjob-unbounded", "spec.activeDeadlineSeconds", validation.SeverityWarning},
		{"RayJob without a start deadline", "apiVersion: ray.io/v1\nkind: RayJob\nmetadata: {name: job}\nspec:\n  entrypoint: python x.py\n  shutdownAfterJobFinishes: true\n  activeDeadlineSeconds: 3600\n  backoffLimit: 1\n  rayClusterSpec:\n" + indent(strings.SplitN(base, "spec:\n", 2)[1], "  "), "rayjob-unbounded", "spec.preRunningDeadlineSeconds", validation.SeverityWarning},
		{"RayJob TTL without shutdown", "apiVersion: ray.io/v1\nkind: RayJob\nmetadata: {name: job}\nspec:\n  entrypoint: python x.py\n  ttlSecondsAfterFinished: 60\n  rayClusterSpec:\n" + indent(strings.SplitN(base, "spec:\n", 2)[1], "  "), "rayjob-ttl-without-shutdown", "spec.ttlSecondsAfterFinished", validation.SeverityError},
		{"RayCronJob gate", "apiVersion: ray.io/v1\nkind: RayCronJob\nmetadata: {name: nightly}\nspec:\n  schedule: \"0 3 * * *\"\n  jobTemplate:\n    entrypoint: python x.py\n    shutdownAfterJobFinishes: true\n    rayClusterSpec:\n" + indent(strings.SplitN(base, "spec:\n", 2)[1], "    "), "raycronjob-feature-gate", "kind", validation.SeverityWarning},
		{"wrong apiVersion", strings.Replace(base, "ray.io/v1", "ray.io/v2", 1), "type", "apiVersion", validation.SeverityError},
		{"Deployment typo", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  replica: 2\n  selector: {matchLabels: {app: a}}\n  template:\n    metadata: {labels: {app: a}}\n    spec: {containers: [{name: c, image: i}]}\n", "unknown-field", "spec.replica", validation.SeverityError},
		{"Deployment selector", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  selector: {matchLabels: {app: a}}\n  template:\n    metadata: {labels: {app: b}}\n    spec: {containers: [{name: c, image: i}]}\n", "schema", "spec.template.metadata.labels", validation.SeverityError},
		{"Service port type", "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec:\n  ports: [{port: http}]\n", "schema", "spec.ports[0].port", validation.SeverityError},
		{"exposed dashboard Service", "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec:\n  type: NodePort\n  ports: [{port: 8265}]\n", "exposed-dashboard", "spec.ports[0]", validation.SeverityWarning},
		{"duplicate env", strings.Replace(base, "name: ray-worker\n", "name: ray-worker\n          env: [{name: A, value: \"1\"}, {name: A, value: \"2\"}]\n", 1), "duplicate-env", "spec.workerGroupSpecs[0].template.spec.containers[0].env[1].name", validation.SeverityWarning},
		{"PDB over Ray pods", "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: p}\nspec:\n  maxUnavailable: 1\n  selector: {matchLabels: {ray.io/cluster: demo}}\n", "pdb-ray-pods", "spec.maxUnavailable", validation.SeverityWarning},
		{"Service selecting the RayCluster's labels", "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec:\n  selector: {ray.io/node-type: head, ray.io/originated-from-cr-name: serve}\n  ports: [{port: 8000}]\n", "selector-matches-no-pod", "spec.selector.ray.io/originated-from-cr-name", validation.SeverityWarning},
		{"duplicate key", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: \"1\"}\ndata: {b: \"2\"}\n", "parse", "", validation.SeverityError},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs := lintString(t, c.doc)
			if c.id == "" { // label value: the pod-label check
				if !has(fs, "pod-label", "spec.workerGroupSpecs[0].template.metadata.labels.team", validation.SeverityError) {
					t.Errorf("findings:\n%s", list(fs))
				}
				return
			}
			if !has(fs, c.id, c.path, c.severity) {
				t.Errorf("want %s [%s] at %q; findings:\n%s", c.severity, c.id, c.path, list(fs))
			}
		})
	}
	bounded := "apiVersion: ray.io/v1\nkind: RayJob\nmetadata: {name: job}\nspec:\n  entrypoint: python x.py\n  shutdownAfterJobFinishes: true\n  activeDeadlineSeconds: 3600\n  preRunningDeadlineSeconds: 600\n  backoffLimit: 0\n  rayClusterSpec:\n" + indent(strings.SplitN(base, "spec:\n", 2)[1], "  ")
	if fs := lintString(t, bounded); has(fs, "rayjob-unbounded", "", validation.SeverityWarning) {
		t.Errorf("a RayJob with every bound set: %s", list(fs))
	}
}

func has(fs []validation.Finding, id, path string, sev validation.Severity) bool {
	for _, f := range fs {
		if f.ID == id && f.Severity == sev && (path == "" || f.Path == path) {
			return true
		}
	}
	return false
}

func list(fs []validation.Finding) string {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString("  " + f.String() + "\n")
	}
	return b.String()
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n") + "\n"
}

func rayClusterDoc(name string) string { return fmt.Sprintf(rayCluster, name) }

func lintDocs(t testing.TB, doc string) []validation.Document {
	docs, err := validation.ReadDocuments("bench.yaml", strings.NewReader(doc))
	if err != nil || len(docs) == 0 || docs[0].Err != nil {
		t.Fatalf("%v %v", docs, err)
	}
	return docs
}

// TestLintUsersCorpusGolden pins what lint says about testdata/users (the
// YAML TestLintAgreesWithTheRealSystems holds to the real API server and
// operator), so that a change in wording or coverage shows in review
// (update with go test ./manifest/validation/ -update).
func TestLintUsersCorpusGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/users/*.yaml")
	v := validation.NewValidator()
	var b strings.Builder
	for _, file := range files {
		docs, err := validation.LoadDocuments(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range validation.Lint(v, docs) {
			b.WriteString(f.String() + "\n")
		}
	}
	golden.Assert(t, b.String(), "users.findings.golden")
}

// TestLintNamesGeneratedObjects: an object with generateName and no name
// is named by the API server before it is validated, so it is fine — and
// findings call it by its prefix.
func TestLintNamesGeneratedObjects(t *testing.T) {
	fs := lintString(t, "apiVersion: ray.io/v1\nkind: RayJob\nmetadata: {generateName: rayjob-sample-}\nspec:\n  entrypoint: python x.py\n  rayClusterSpec:\n"+indent(strings.SplitN(fmt.Sprintf(rayCluster, "x"), "spec:\n", 2)[1], "  "))
	if validation.HasErrors(fs) {
		t.Fatalf("errors for a generateName object:\n%s", list(fs))
	}
	if len(fs) == 0 || fs[0].Object != "RayJob rayjob-sample-*" {
		t.Fatalf("findings should name the object by its prefix:\n%s", list(fs))
	}
}

// FuzzLint: whatever bytes a user hands `lint`, reading and linting them
// does not panic, and every finding names its object.
func FuzzLint(f *testing.F) {
	files, _ := filepath.Glob("testdata/users/*.yaml")
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		for _, doc := range strings.Split(string(data), "\n---\n") {
			f.Add([]byte(doc))
		}
	}
	f.Add([]byte("apiVersion: v1\nkind: List\nitems: [{apiVersion: ray.io/v1, kind: RayCluster, metadata: {name: a}, spec: {}}]\n"))
	v := validation.NewValidator()
	f.Fuzz(func(t *testing.T, data []byte) {
		docs, err := validation.ReadDocuments("fuzz.yaml", strings.NewReader(string(data)))
		if err != nil {
			return
		}
		for _, finding := range validation.Lint(v, docs) {
			if finding.Object == "" {
				t.Fatalf("a finding without its object: %+v", finding)
			}
		}
	})
}

// TestValidateLeavesItsInputAlone: validating an object (defaults applied,
// a namespace assumed, a generated name given) never changes the caller's
// object — the fast paths share unchanged parts of it.
func TestValidateLeavesItsInputAlone(t *testing.T) {
	files, _ := filepath.Glob("testdata/users/*.yaml")
	more, _ := filepath.Glob("../testdata/*.yaml")
	v := validation.NewValidator()
	for _, file := range append(files, more...) {
		docs, err := validation.LoadDocuments(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range docs {
			if d.Err != nil {
				continue
			}
			d.Object.SetNamespace("") // so that the default namespace is assumed
			before := d.Object.DeepCopy()
			v.Validate(d.Object)
			if !equality.Semantic.DeepEqual(before.Object, d.Object.Object) {
				t.Errorf("%s: Validate changed the object", d.Source)
			}
		}
	}
}

// TestLintKeysWithoutValues: a key written with no value reads as null.
// The API server drops such a null from a custom resource where the schema
// allows none and has no default (PruneNonNullableNullsWithoutDefaults,
// after pruning), defaults it where there is a default, and a built-in's
// typed decoding leaves the field at its zero value — so none of these is
// an error, unless the field was required or the null is a list item.
func TestLintKeysWithoutValues(t *testing.T) {
	base := fmt.Sprintf(rayCluster, "demo")
	head := "    template:\n      spec:\n        containers:\n        - name: ray-head\n"
	cases := []struct {
		name, doc string
		path      string // the error's field; "" for none
	}{
		{"rayStartParams", strings.Replace(base, "rayStartParams: {}", "rayStartParams:", -1), ""},
		{"tolerations, env, ports and requests", strings.Replace(base, head, "    template:\n      metadata:\n        labels:\n      spec:\n        tolerations:\n        nodeSelector:\n        containers:\n        - name: ray-head\n          env:\n          ports:\n          resources:\n            requests:\n", 1), ""},
		{"the object's labels", strings.Replace(base, "  name: demo\n", "  name: demo\n  labels:\n  annotations:\n", 1), ""},
		{"a status a create cannot set", base + "status:\n  state: 5\n  desiredWorkerReplicas: many\n", ""},
		{"required containers", strings.Replace(base, "        containers:\n        - name: ray-head\n          image: rayproject/ray:2.54.0\n", "        containers:\n", 1), "spec.headGroupSpec.template.spec.containers"},
		{"a list item", strings.Replace(base, head, "    template:\n      spec:\n        tolerations:\n        -\n        containers:\n        - name: ray-head\n", 1), "spec.headGroupSpec.template.spec.tolerations[0]"},
		{"a Deployment", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d, labels: }\nspec:\n  replicas:\n  selector: {matchLabels: {app: a}}\n  template:\n    metadata: {labels: {app: a}}\n    spec:\n      tolerations:\n      containers:\n      - name: c\n        image: i\n        env:\n        resources:\n", ""},
		{"a Deployment's containers", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  selector: {matchLabels: {app: a}}\n  template:\n    metadata: {labels: {app: a}}\n    spec:\n      containers:\n", "spec.template.spec.containers"},
		{"an HTTPRoute's matches (defaulted)", "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: r}\nspec:\n  parentRefs: [{name: g}]\n  hostnames:\n  rules:\n  - matches:\n    filters:\n    backendRefs: [{name: s, port: 80}]\n", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var errs []validation.Finding
			for _, f := range lintString(t, c.doc) {
				if f.Severity == validation.SeverityError {
					errs = append(errs, f)
				}
			}
			if c.path == "" && len(errs) > 0 {
				t.Errorf("want no errors; findings:\n%s", list(errs))
			}
			if c.path != "" && !has(errs, "schema", c.path, validation.SeverityError) && !has(errs, "pod-containers", c.path, validation.SeverityError) {
				t.Errorf("want an error at %s; findings:\n%s", c.path, list(errs))
			}
		})
	}
}

// TestLintHeadWithoutContainers: where the operator would build an
// object from the head's first container (the Ingress of enableIngress,
// a RayJob's submitter), a head without containers is named at its
// containers, and lint does not fail on the object.
func TestLintHeadWithoutContainers(t *testing.T) {
	noContainers := strings.Replace(fmt.Sprintf(rayCluster, "demo"), "        containers:\n        - name: ray-head\n          image: rayproject/ray:2.54.0\n", "        containers: []\n", 1)
	ingress := strings.Replace(noContainers, "    rayStartParams: {}\n", "    enableIngress: true\n    rayStartParams: {}\n", 1)
	spec := strings.SplitN(noContainers, "spec:\n", 2)[1]
	job := "apiVersion: ray.io/v1\nkind: RayJob\nmetadata:\n  name: job\nspec:\n  entrypoint: python run.py\n  submitterConfig:\n    backoffLimit: 1\n  rayClusterSpec:\n" +
		regexp.MustCompile(`(?m)^`).ReplaceAllString(strings.TrimSuffix(spec, "\n"), "    ") + "\n"
	for name, doc := range map[string]string{"enableIngress": ingress, "a RayJob's submitter": job} {
		t.Run(name, func(t *testing.T) {
			findings := lintString(t, doc)
			for _, f := range findings {
				if f.ID == "internal" {
					t.Errorf("lint failed on the object: %+v", f)
				}
			}
			if !slices.ContainsFunc(findings, func(f validation.Finding) bool {
				return f.ID == "pod-containers" && strings.HasSuffix(f.Path, "headGroupSpec.template.spec.containers")
			}) {
				t.Errorf("no pod-containers finding at the head's containers:\n%s", list(findings))
			}
		})
	}
}

// TestLintListItemsKeepTheirLines: the findings of a List's items point
// at the item's own lines.
func TestLintListItemsKeepTheirLines(t *testing.T) {
	const list = `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: first
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: Second_Bad
`
	fs := lintString(t, list)
	if len(fs) != 1 || fs[0].Source != "case.yaml#1.items[1]" || fs[0].Path != "metadata.name" || fs[0].Line != 11 {
		t.Fatalf("want one finding at case.yaml#1.items[1] line 11 metadata.name, got %v", fs)
	}
}

// BenchmarkLintStream lints n ConfigMaps as users hand them in — one
// block List, one JSON List, n documents — or one ConfigMap of n keys,
// read and linted as a stream
// (LintReader): ns/object must stay flat as n grows (it grew with n when
// every List item re-scanned the whole List's lines). The memory a whole
// process holds is measured in docs/testing.md's way (valid_large.yaml).
func BenchmarkLintStream(b *testing.B) {
	v := validation.NewValidator()
	for _, shape := range []string{"list", "json", "documents", "one-object"} {
		for _, n := range []int{1000, 10000, 100000} {
			var doc strings.Builder
			switch shape {
			case "list":
				doc.WriteString("apiVersion: v1\nkind: List\nitems:\n")
				for i := range n {
					fmt.Fprintf(&doc, "- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: cm-%d\n  data:\n    key: value\n", i)
				}
			case "json":
				doc.WriteString(`{"apiVersion": "v1", "kind": "List", "items": [`)
				for i := range n {
					if i > 0 {
						doc.WriteString(",\n")
					}
					fmt.Fprintf(&doc, `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm-%d"}, "data": {"key": "value"}}`, i)
				}
				doc.WriteString("]}\n")
			case "documents":
				for i := range n {
					fmt.Fprintf(&doc, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%d\ndata:\n  key: value\n", i)
				}
			case "one-object": // one ConfigMap of n keys
				doc.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\ndata:\n")
				for i := range n {
					fmt.Fprintf(&doc, "  key-%d: value\n", i)
				}
			}
			objects := n
			if shape == "one-object" {
				objects = 1
			}
			data := doc.String()
			b.Run(fmt.Sprintf("%s/%d", shape, n), func(b *testing.B) {
				for b.Loop() {
					fs, read, err := validation.LintReader(v, validation.NewDocumentReader("in.yaml", strings.NewReader(data)))
					if err != nil || read != objects || len(fs) != 0 {
						b.Fatalf("%d objects, %d findings, %v", read, len(fs), err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/object") // ns/key for one-object
			})
		}
	}
}

// TestLiteralSecrets: a secret written in an env value or a command-line
// argument of any pod template is a warning naming the field, recognised
// by its name or by its shape; references, paths, booleans and
// placeholders are not.
func TestLiteralSecrets(t *testing.T) {
	pod := func(container string) string {
		return "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n    image: busybox\n" + container
	}
	for _, c := range []struct {
		name, container string
		path            string // "" for no finding
	}{
		{"a token by name", "    env:\n    - {name: HF_TOKEN, value: abcdefgh12345678}\n", "spec.containers[0].env[0].value"},
		{"a password by name", "    env:\n    - {name: A, value: x}\n    - {name: DB_PASSWORD, value: hunter2hunter2}\n", "spec.containers[0].env[1].value"},
		{"a GitHub token by shape", "    env:\n    - {name: HELPER, value: ghp_0123456789abcdefghijklmnopqrstuvwxyz}\n", "spec.containers[0].env[0].value"},
		{"an AWS key by shape", "    env:\n    - {name: X, value: AKIAABCDEFGHIJKLMNOP}\n", "spec.containers[0].env[0].value"},
		{"a flag", "    args: [--port=8000, --api-key=sk-abcdefghijklmnopqrstuvwxyz]\n", "spec.containers[0].args[1]"},
		{"a flag by name", "    command: [serve, --auth-token=0123456789abcdef]\n", "spec.containers[0].command[1]"},
		{"a reference", "    env:\n    - {name: HF_TOKEN, value: $(TOKEN_FROM_SECRET)}\n", ""},
		{"a path", "    env:\n    - {name: TOKEN_FILE, value: /var/run/secrets/token}\n    - {name: API_KEY_PATH, value: /etc/key}\n", ""},
		{"a boolean", "    env:\n    - {name: AUTH_TOKEN_REQUIRED, value: \"true\"}\n", ""},
		{"a literal password by name", "    env:\n    - {name: API_KEY, value: changeme}\n", "spec.containers[0].env[0].value"},
		{"a short value", "    env:\n    - {name: API_KEY, value: none}\n", ""},
		{"URLs, names, files, numbers, references", "    env:\n    - {name: TOKEN_URL, value: \"https://auth.example.org/oauth/token\"}\n" +
			"    - {name: HF_TOKEN_SECRET_NAME, value: hf-token-secret}\n    - {name: GOOGLE_APPLICATION_CREDENTIALS, value: ./sa.json}\n" +
			"    - {name: MAX_TOKEN_LENGTH, value: \"131072000\"}\n    - {name: AUTH_TOKEN, value: $HF_TOKEN_X}\n" +
			"    args: [--secret-name=ray-head-tls, --credentials-file=service-account.json, --model=my-sk-learn-model-training-v2]\n", ""},
		{"from a Secret", "    env:\n    - name: HF_TOKEN\n      valueFrom: {secretKeyRef: {name: hf, key: token}}\n", ""},
		{"a name that is not a secret's", "    env:\n    - {name: TOKENIZER_MODEL, value: meta-llama/Llama-3-8B}\n", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []validation.Finding
			for _, f := range lintString(t, pod(c.container)) {
				if f.ID == "literal-secret" {
					got = append(got, f)
				}
			}
			switch {
			case c.path == "" && len(got) > 0:
				t.Errorf("a finding where none is due: %v", got)
			case c.path != "" && (len(got) != 1 || got[0].Path != c.path || got[0].Severity != validation.SeverityWarning || !strings.Contains(got[0].Fix, "secretKeyRef")):
				t.Errorf("findings %v, want one warning at %s", got, c.path)
			}
		})
	}
}
