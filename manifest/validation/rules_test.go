package validation_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gridweave.dev/manifest/validation"
)

// emittedID matches where the source gives a finding its id.
var emittedID = regexp.MustCompile(`(?:^|[^.\w])(?:fail|warn|errorAt|warnAt|at|fieldError)\("([a-z][a-z0-9-]*)"|ID: *"([a-z][a-z0-9-]*)"|\bid :?= "([a-z][a-z0-9-]*)"`)

// TestEveryRuleIsListed holds the rule list to the source both ways:
// every id a finding can carry is listed (with a severity and help), and
// every listed rule is one a finding carries.
func TestEveryRuleIsListed(t *testing.T) {
	emitted := map[string]string{}
	for _, dir := range []string{".", "operator"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range emittedID.FindAllStringSubmatch(string(src), -1) {
				emitted[m[1]+m[2]+m[3]] = f
			}
		}
	}
	for id, file := range emitted {
		if r, ok := validation.RuleByID(id); !ok || r.Help == "" || (r.Severity != validation.SeverityError && r.Severity != validation.SeverityWarning) {
			t.Errorf("%s gives findings the id %q, which the rule list does not hold (with a severity and help)", file, id)
		}
	}
	var listed []string
	for _, r := range validation.Rules() {
		listed = append(listed, r.ID)
		if _, ok := emitted[r.ID]; !ok && !strings.HasPrefix(r.ID, "suppression-") {
			t.Errorf("the rule list holds %q, which no finding carries", r.ID)
		}
	}
	if !slices.IsSorted(listed) {
		t.Error("the rule list is not sorted by id")
	}
}
