package launchcli

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	sigsyaml "sigs.k8s.io/yaml"

	"gridweave.dev/manifest"
)

var (
	usersCorpus = filepath.Join("..", "..", "..", "manifest", "validation", "testdata", "users")
	schemasDir  = filepath.Join("..", "..", "..", "manifest", "validation", "testdata", "schemas")
)

// lintJSON is `lint -o json`'s answer.
type lintJSON struct {
	Objects    int               `json:"objects"`
	Findings   []json.RawMessage `json:"findings"`
	Suppressed []json.RawMessage `json:"suppressed"`
}

// TestLintSARIFIsValid: `launcher lint -o sarif` of the users' corpus is
// valid SARIF 2.1.0 (the OASIS schema), with a result per finding, each
// naming a rule of tool.driver.rules and its file, line and column.
func TestLintSARIFIsValid(t *testing.T) {
	code, out, errOut := runLauncher(t, "", "lint", "-o", "sarif", usersCorpus)
	if code != 1 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	raw, err := os.ReadFile(filepath.Join(schemasDir, "sarif-schema-2.1.0.json"))
	if err != nil {
		t.Fatal(err)
	}
	schemaDoc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	const url = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
	if err := c.AddResource(url, schemaDoc); err != nil {
		t.Fatal(err)
	}
	schema, err := c.Compile(url)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(out))
	if err != nil {
		t.Fatalf("the SARIF output is not JSON: %v", err)
	}
	if err := schema.Validate(inst); err != nil {
		t.Fatalf("the SARIF output breaks the SARIF 2.1.0 schema: %v", err)
	}

	var log struct {
		Runs []struct {
			Tool struct {
				Driver struct {
					Rules []struct {
						ID   string `json:"id"`
						Help struct{ Text string }
					}
				}
			}
			Results []struct {
				RuleID    string `json:"ruleId"`
				RuleIndex int    `json:"ruleIndex"`
				Level     string
				Message   struct{ Text string }
				Locations []struct {
					PhysicalLocation struct {
						ArtifactLocation struct{ URI string }
						Region           *struct{ StartLine, StartColumn int }
					}
				}
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &log); err != nil {
		t.Fatal(err)
	}
	_, jsonOut, _ := runLauncher(t, "", "lint", "-o", "json", usersCorpus)
	var want lintJSON
	if err := json.Unmarshal([]byte(jsonOut), &want); err != nil {
		t.Fatal(err)
	}
	run := log.Runs[0]
	if len(run.Results) != len(want.Findings)+len(want.Suppressed) || len(run.Results) == 0 {
		t.Errorf("%d results for %d findings and %d suppressed", len(run.Results), len(want.Findings), len(want.Suppressed))
	}
	for i, r := range run.Results {
		rule := run.Tool.Driver.Rules[r.RuleIndex]
		loc := r.Locations[0].PhysicalLocation
		if rule.ID != r.RuleID || rule.Help.Text == "" || r.Message.Text == "" || !strings.HasSuffix(loc.ArtifactLocation.URI, ".yaml") ||
			loc.Region == nil || loc.Region.StartLine < 1 || loc.Region.StartColumn < 1 {
			t.Errorf("result %d: %+v (rule %+v)", i, r, rule)
		}
	}
}

// TestLintJUnitIsValid: `launcher lint -o junit` of the users' corpus
// passes xmllint against the JUnit XSD, with a test case per object and a
// failure per error.
func TestLintJUnitIsValid(t *testing.T) {
	if _, err := exec.LookPath("xmllint"); err != nil {
		t.Fatalf("xmllint (Debian's libxml2-utils; .ci/run installs it): %v", err)
	}
	code, out, errOut := runLauncher(t, "", "lint", "-o", "junit", usersCorpus)
	if code != 1 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	report := filepath.Join(t.TempDir(), "lint.xml")
	if err := os.WriteFile(report, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := exec.Command("xmllint", "--noout", "--schema", filepath.Join(schemasDir, "junit.xsd"), report).CombinedOutput(); err != nil {
		t.Fatalf("xmllint: %v\n%s", err, got)
	}
	var suites struct {
		Suites []struct {
			Cases []struct {
				Name     string `xml:"name,attr"`
				Failures []struct {
					Type string `xml:"type,attr"`
				} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal([]byte(out), &suites); err != nil {
		t.Fatal(err)
	}
	_, jsonOut, _ := runLauncher(t, "", "lint", "-o", "json", usersCorpus)
	var want lintJSON
	if err := json.Unmarshal([]byte(jsonOut), &want); err != nil {
		t.Fatal(err)
	}
	var cases, failures, errorsFound int
	for _, s := range suites.Suites {
		for _, c := range s.Cases {
			cases++
			failures += len(c.Failures)
		}
	}
	for _, f := range want.Findings {
		if strings.Contains(string(f), `"severity": "error"`) || strings.Contains(string(f), `"severity":"error"`) {
			errorsFound++
		}
	}
	if cases < want.Objects || failures != errorsFound {
		t.Errorf("%d test cases for %d objects, %d failures for %d errors", cases, want.Objects, failures, errorsFound)
	}
}

// annotation is a GitHub workflow command as lint writes it.
var annotation = regexp.MustCompile(`^::(error|warning) file=[^,]+(,line=\d+,col=\d+)?,title=[^:]+::.+$`)

// TestLintGitHubAnnotations: `-o github` writes one workflow command per
// finding, then the summary.
func TestLintGitHubAnnotations(t *testing.T) {
	_, out, _ := runLauncher(t, "", "lint", "-o", "github", usersCorpus)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	_, jsonOut, _ := runLauncher(t, "", "lint", "-o", "json", usersCorpus)
	var want lintJSON
	if err := json.Unmarshal([]byte(jsonOut), &want); err != nil {
		t.Fatal(err)
	}
	if len(lines) != len(want.Findings)+1 {
		t.Fatalf("%d lines for %d findings", len(lines), len(want.Findings))
	}
	for _, l := range lines[:len(lines)-1] {
		if !annotation.MatchString(l) {
			t.Errorf("not a workflow annotation: %s", l)
		}
	}
}

// TestLintExitCodes: 0 clean or warnings only, 1 errors (or warnings with
// --fail-on warning), 2 usage or unreadable input.
func TestLintExitCodes(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	clean := write("clean.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  a: b\n")
	warns := write("warn.yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: a\n    image: busybox\n    env:\n    - {name: A, value: \"1\"}\n    - {name: A, value: \"2\"}\n")
	errs := write("err.yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: a\n")
	badConfig := write("bad-config.yaml", "rules:\n  duplicate-env: loud\n")
	for _, c := range []struct {
		name string
		args []string
		code int
	}{
		{"clean", []string{clean}, 0},
		{"warnings only", []string{warns}, 0},
		{"warnings, --fail-on warning", []string{"--fail-on", "warning", warns}, 1},
		{"errors", []string{errs}, 1},
		{"clean, --fail-on warning", []string{"--fail-on", "warning", clean}, 0},
		{"an unknown format", []string{"-o", "xml", clean}, 2},
		{"an unknown --fail-on", []string{"--fail-on", "info", clean}, 2},
		{"a file that is not there", []string{filepath.Join(dir, "nothing.yaml")}, 2},
		{"no path", nil, 2},
		{"a bad config", []string{"--config", badConfig, clean}, 2},
		{"a config that is not there", []string{"--config", filepath.Join(dir, "none.yaml"), clean}, 2},
		{"--list-rules", []string{"--list-rules"}, 0},
		{"--list-rules with a path", []string{"--list-rules", clean}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := runLauncher(t, "", append([]string{"lint"}, c.args...)...)
			if code != c.code {
				t.Errorf("exit %d, want %d\n%s%s", code, c.code, out, errOut)
			}
		})
	}
}

// TestLintListRules: --list-rules prints every rule once, with its
// severity and help; -o json as JSON.
func TestLintListRules(t *testing.T) {
	_, out, _ := runLauncher(t, "", "lint", "--list-rules")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	_, jsonOut, _ := runLauncher(t, "", "lint", "--list-rules", "-o", "json")
	var list struct {
		Rules []struct{ ID, Severity, Help string }
	}
	if err := json.Unmarshal([]byte(jsonOut), &list); err != nil {
		t.Fatal(err)
	}
	if len(lines) != len(list.Rules) || len(list.Rules) < 80 {
		t.Fatalf("%d lines, %d rules in JSON", len(lines), len(list.Rules))
	}
	for i, r := range list.Rules {
		if f := strings.Fields(lines[i]); len(f) < 3 || f[0] != r.ID || f[1] != r.Severity || r.Help == "" {
			t.Errorf("line %q for rule %+v", lines[i], r)
		}
	}
}

// TestLintConfigDiscovery: the config file is found from the current
// directory upward and applies its rules and exclusions; --config names
// another; the summary counts what it suppressed.
func TestLintConfigDiscovery(t *testing.T) {
	root := t.TempDir()
	nested := filepath.Join(root, "team", "app")
	if err := os.MkdirAll(filepath.Join(nested, "vendor"), 0o755); err != nil {
		t.Fatal(err)
	}
	pod := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: a\n    image: busybox\n    env:\n    - {name: A, value: \"1\"}\n    - {name: A, value: \"2\"}\n"
	for path, text := range map[string]string{
		filepath.Join(nested, "pod.yaml"):              pod,
		filepath.Join(nested, "vendor", "broken.yaml"): "apiVersion: v1\nkind: Pod\nmetadata:\n  name: q\nspec:\n  containers:\n  - name: a\n",
		filepath.Join(root, ".gridweave-lint.yaml"):    "rules:\n  duplicate-env: error\n  no-such-rule: off\nexclude:\n  - team/app/vendor\n",
		filepath.Join(root, "quiet.yaml"):              "rules:\n  duplicate-env: off\n",
	} {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(nested)
	code, out, _ := runLauncher(t, "", "lint", ".")
	if code != 1 || !strings.Contains(out, "error [duplicate-env]") || strings.Contains(out, "broken.yaml") ||
		!strings.Contains(out, "[suppression-unknown-rule]") || !strings.Contains(out, "1 objects, 1 errors, 1 warnings, 0 suppressed") {
		t.Errorf("with the config found upward: exit %d\n%s", code, out)
	}
	// Linting the config's own directory leaves the config out.
	t.Chdir(root)
	if code, out, _ := runLauncher(t, "", "lint", "--config", filepath.Join(root, ".gridweave-lint.yaml"), "."); strings.Contains(out, ".gridweave-lint.yaml:1:") {
		t.Errorf("lint . linted its own config: exit %d\n%s", code, out)
	}
	t.Chdir(nested)
	code, out, _ = runLauncher(t, "", "lint", "--config", filepath.Join(root, "quiet.yaml"), "pod.yaml")
	if code != 0 || !strings.Contains(out, "1 objects, 0 errors, 0 warnings, 1 suppressed") {
		t.Errorf("with --config: exit %d\n%s", code, out)
	}
}

// TestPreCommitHook: the repository's pre-commit hook runs this command's
// lint on YAML and JSON files.
func TestPreCommitHook(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", ".pre-commit-hooks.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var hooks []struct {
		ID, Name, Description, Entry, Language, Files, Exclude string
	}
	if err := sigsyaml.UnmarshalStrict(raw, &hooks); err != nil {
		t.Fatal(err)
	}
	if len(hooks) != 1 || hooks[0].ID != "gridweave-lint" || hooks[0].Entry != "launcher lint" || hooks[0].Language != "golang" {
		t.Fatalf("hooks: %+v", hooks)
	}
	files, exclude := regexp.MustCompile(hooks[0].Files), regexp.MustCompile(hooks[0].Exclude)
	for name, want := range map[string]bool{"deploy/a.yaml": true, "b.yml": true, "c.json": true, "main.go": false, ".gridweave-lint.yaml": false} {
		if got := files.MatchString(name) && !exclude.MatchString(name); got != want {
			t.Errorf("the hook runs on %s: %v, want %v", name, got, want)
		}
	}
}

// TestSchemaCommand: `launcher schema KIND` prints manifest.Schema's
// document for each kind; another kind is a usage error.
func TestSchemaCommand(t *testing.T) {
	for _, kind := range manifest.SchemaKinds {
		code, out, errOut := runLauncher(t, "", "schema", kind)
		want, err := manifest.Schema(kind)
		if err != nil {
			t.Fatal(err)
		}
		if code != 0 || strings.TrimSpace(out) != string(want) {
			t.Errorf("schema %s: exit %d %s", kind, code, errOut)
		}
		var doc map[string]any
		draft := "https://json-schema.org/draft/2020-12/schema"
		if kind == "chart-values" {
			draft = "http://json-schema.org/draft-07/schema#" // what every Helm 3 release enforces
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil || doc["$schema"] != draft {
			t.Errorf("schema %s: not a %s schema: %v", kind, draft, err)
		}
	}
	if code, _, _ := runLauncher(t, "", "schema", "pod"); code != 2 {
		t.Errorf("schema pod: exit %d, want 2", code)
	}
}
