package validation

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Severity of a finding.
type Severity string

const (
	// SeverityError: the API server or the KubeRay operator would reject it.
	SeverityError Severity = "error"
	// SeverityWarning: accepted, but questionable.
	SeverityWarning Severity = "warning"
)

// Finding is one problem found in one object.
type Finding struct {
	ID       string   `json:"id"`
	Severity Severity `json:"severity"`
	// Source is where the object came from (file and document index), if known.
	Source string `json:"source,omitempty"`
	// Line is the line of Path (or of its nearest ancestor) in the
	// source file, when the object was read from YAML.
	Line int `json:"line,omitempty"`
	// Object is "Kind namespace/name".
	Object  string `json:"object"`
	Path    string `json:"path,omitempty"`
	Message string `json:"message"`
	Fix     string `json:"fix,omitempty"`
	// embeddedIn and embeddedLine are, for a finding inside YAML embedded
	// in a string field (a RayService's serveConfigV2), that field's path
	// and the finding's line in it.
	embeddedIn   string
	embeddedLine int
}

func (f Finding) String() string {
	var b strings.Builder
	switch {
	case f.Source != "" && f.Line > 0:
		file, _, _ := strings.Cut(f.Source, "#")
		fmt.Fprintf(&b, "%s:%d: ", file, f.Line)
	case f.Source != "":
		b.WriteString(f.Source + ": ")
	}
	fmt.Fprintf(&b, "%s: %s [%s]", f.Object, f.Severity, f.ID)
	if f.Path != "" {
		b.WriteString(" " + f.Path + ":")
	}
	b.WriteString(" " + f.Message)
	if f.Fix != "" {
		b.WriteString(" (fix: " + f.Fix + ")")
	}
	return b.String()
}

// HasErrors reports whether any finding is an error.
func HasErrors(fs []Finding) bool {
	for _, f := range fs {
		if f.Severity == SeverityError {
			return true
		}
	}
	return false
}

// SortFindings orders findings by source, object, line, severity (errors
// first), path and id, so output reads top to bottom and is stable.
func SortFindings(fs []Finding) {
	sort.SliceStable(fs, func(i, j int) bool {
		a, b := fs[i], fs[j]
		if a.Source != b.Source {
			return sourceLess(a.Source, b.Source)
		}
		if a.Object != b.Object {
			return a.Object < b.Object
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Severity != b.Severity {
			return a.Severity == SeverityError
		}
		if a.Path != b.Path {
			return a.Path < b.Path
		}
		return a.ID < b.ID
	})
}

func describe(u *unstructured.Unstructured) string {
	name := u.GetName()
	if name == "" && u.GetGenerateName() != "" {
		name = u.GetGenerateName() + "*"
	} else if name == "" {
		name = "(no name)"
	}
	if ns := u.GetNamespace(); ns != "" {
		name = ns + "/" + name
	}
	kind := u.GetKind()
	if kind == "" {
		kind = "(no kind)"
	}
	return kind + " " + name
}

// sourceLess orders "file#N" sources by file, then by document number
// (file#2 before file#10).
func sourceLess(a, b string) bool {
	af, an, _ := strings.Cut(a, "#")
	bf, bn, _ := strings.Cut(b, "#")
	if af != bf {
		return af < bf
	}
	return naturalLess(an, bn)
}

// naturalLess orders strings with their runs of digits read as numbers:
// "1.items[9]" before "1.items[10]", "2" before "10".
func naturalLess(a, b string) bool {
	for a != "" && b != "" {
		ad, bd := leadingDigits(a), leadingDigits(b)
		if ad != "" && bd != "" {
			ai, _ := strconv.Atoi(ad)
			bi, _ := strconv.Atoi(bd)
			if ai != bi {
				return ai < bi
			}
			a, b = a[len(ad):], b[len(bd):]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func leadingDigits(s string) string {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return s[:i]
}
