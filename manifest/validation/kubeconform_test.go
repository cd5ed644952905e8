package validation_test

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gridweave.dev/manifest/validation"
)

// TestKubeconformFixtures runs the acceptance fixtures of kubeconform
// v0.8.0, a public validator, read from the module cache: every fixture it
// expects to fail in strict mode fails with us, naming the same field;
// every one it expects to pass passes — except where the real API server
// disagrees with kubeconform, and then lint follows the server (said per
// fixture below).
func TestKubeconformFixtures(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: downloads kubeconform's module")
	}
	out, err := exec.Command("go", "mod", "download", "-json", "github.com/yannh/kubeconform@v0.8.0").Output()
	if err != nil {
		t.Fatalf("go mod download kubeconform: %v", err)
	}
	var module struct{ Dir string }
	if err := json.Unmarshal(out, &module); err != nil || module.Dir == "" {
		t.Fatalf("go mod download: %v %s", err, out)
	}
	fixtures := filepath.Join(module.Dir, "fixtures")
	type expect struct {
		objects int
		// errorAt is the path of the one error expected ("" none);
		// parse: the document does not parse.
		errorAt string
		// warning is the ID of a warning expected on every object.
		warning string
	}
	cases := map[string]expect{
		"valid.yaml":                                   {objects: 1},
		"valid.json":                                   {objects: 1},
		"valid_version.yaml":                           {objects: 1},
		"multi_valid.yaml":                             {objects: 6},
		"multi_valid_source.yaml":                      {objects: 6},
		"folder":                                       {objects: 7},
		"int_or_string.yaml":                           {objects: 1},
		"generate_name.yaml":                           {objects: 1},
		"quantity.yaml":                                {objects: 1},
		"null_string.yaml":                             {objects: 1},
		"null_array.yaml":                              {objects: 1},
		"list_valid.yaml":                              {objects: 6},
		"list_empty_valid.yaml":                        {objects: 0},
		"multi_with_list.yaml":                         {objects: 2},
		"blank.yaml":                                   {objects: 0},
		"comment.yaml":                                 {objects: 0},
		"unconventional_keys.yaml":                     {objects: 1},
		"full_domain_group.yaml":                       {objects: 1},
		"duplicates.yaml":                              {objects: 2},
		"duplicates-non-namespaced.yaml":               {objects: 2},
		"duplicates-with-namespace.yaml":               {objects: 2},
		"duplicates-with-namespace-default.yaml":       {objects: 2},
		"same-object-different-namespace.yaml":         {objects: 2},
		"same-object-different-namespace-default.yaml": {objects: 2},
		"invalid.yaml":                                 {objects: 1, errorAt: "spec.replicas"},
		"list_invalid.yaml":                            {objects: 2, errorAt: "spec.replicas"},
		"multi_invalid.yaml":                           {objects: 6, errorAt: "spec.ports[0].port"},
		"multi_invalid_resources.yaml":                 {objects: 5, errorAt: "apiVersion"}, // `kind:` with no value
		// kubeconform passes it without -strict; strict (as the API server
		// with fieldValidation=Strict) refuses the unknown field.
		"extra_property.yaml": {objects: 1, errorAt: "spec.replicas"},
		// A key written twice: kubeconform -strict refuses it, as the API
		// server's strict decoding does.
		"duplicate_property.yaml": {objects: 1, errorAt: "parse"},
		"missing_kind.yaml":       {objects: 1, errorAt: "apiVersion"},
		"missing_apiversion.yaml": {objects: 1, errorAt: "apiVersion"},
		"missing_kind_value.yaml": {objects: 1, errorAt: "apiVersion"},
		// kubeconform validates it against its schema for
		// apiextensions.k8s.io/v1beta1; a 1.35 API server no longer serves
		// that version (removed in 1.22) and refuses it.
		"crd_schema.yaml": {objects: 1, errorAt: "apiVersion"},
		// The same with an apps/v1beta1 Deployment (removed in 1.16) beside
		// an apps/v1 one.
		"same-kind-different-api.yaml": {objects: 2, errorAt: "apiVersion"},
		// Custom resources without their CRD: kubeconform fails for want of
		// a schema (passes with -ignore-missing-schemas); lint cannot know
		// whether the cluster has the CRD, and says it checked metadata only.
		"test_crd.yaml":                        {objects: 1, warning: "unknown-kind"},
		"httpproxy.yaml":                       {objects: 1, warning: "unknown-kind"},
		"grafana-alert-rule-group-sample.yaml": {objects: 1, warning: "unknown-kind"},
		// A made-up kind in the core group (kubeconform's -skip fixture): no
		// custom resource can be in a group without a dot, and the API
		// server serves no such kind.
		"duplicates-skipped-kinds.yaml": {objects: 2, errorAt: "kind"},
		// One List of 100,000 objects, which kubeconform's suite expects to
		// pass.
		"valid_large.yaml": {objects: 100000},
	}
	v := validation.NewValidator()
	for name, want := range cases {
		t.Run(name, func(t *testing.T) {
			if name == "valid_large.yaml" && testing.Short() {
				t.Skip("-short: 100,000 objects")
			}
			paths := []string{filepath.Join(fixtures, name)}
			if !strings.Contains(name, ".") { // a directory
				paths, _ = filepath.Glob(filepath.Join(fixtures, name, "*.yaml"))
			}
			var docs []validation.Document
			for _, p := range paths {
				d, err := validation.LoadDocuments(p)
				if err != nil {
					t.Fatal(err)
				}
				docs = append(docs, d...)
			}
			findings := validation.Lint(v, docs)
			if len(docs) != want.objects {
				t.Errorf("%d objects, want %d", len(docs), want.objects)
			}
			var errs []validation.Finding
			warned := 0
			for _, f := range findings {
				switch {
				case f.Severity == validation.SeverityError:
					errs = append(errs, f)
				case f.ID == want.warning:
					warned++
				default:
					t.Errorf("unexpected: %s", f)
				}
			}
			switch want.errorAt {
			case "":
				if len(errs) > 0 {
					t.Errorf("kubeconform passes it; lint finds %v", errs)
				}
			case "parse":
				if len(errs) != 1 || errs[0].ID != "parse" {
					t.Errorf("want a parse error, got %v", errs)
				}
			default:
				if len(errs) == 0 || !strings.HasPrefix(errs[0].Path, want.errorAt) {
					t.Errorf("want an error at %s, got %v", want.errorAt, errs)
				}
			}
			if want.warning != "" && warned != want.objects {
				t.Errorf("want %s on each of %d objects, got %d: %v", want.warning, want.objects, warned, findings)
			}
		})
	}
	stored, _ := filepath.Glob(filepath.Join(fixtures, "*.y*ml"))
	for _, f := range stored {
		if _, ok := cases[filepath.Base(f)]; !ok {
			t.Errorf("%s: a kubeconform fixture this test does not cover", filepath.Base(f))
		}
	}
}
