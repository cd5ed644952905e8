package validation

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Reports of a lint run in the formats CI systems read: SARIF 2.1.0
// (GitHub code scanning and most security dashboards), JUnit XML (test
// report views) and GitHub workflow annotations.

// Run is what one lint run found, for a report.
type Run struct {
	// Objects are the objects linted, in order (for JUnit's test cases).
	Objects []ObjectRef
	// Findings are the findings kept, Suppressed those silenced.
	Findings   []Finding
	Suppressed []Suppressed
	// Sources are the texts of the files, by name, to give columns.
	Sources map[string][]byte
	// ToolVersion is the launcher's version.
	ToolVersion string
}

// ObjectRef is one object linted: where it came from and what it is.
type ObjectRef struct {
	Source string // file#N
	Object string // Kind namespace/name
}

// DescribeDocument names a document's object as findings do ("Kind
// namespace/name"), or "(document)" when it is not an object.
func DescribeDocument(d Document) string {
	if d.Err != nil || d.Object == nil {
		return "(document)"
	}
	return describe(d.Object)
}

// location splits a finding's source into its file and gives the column
// of its line's first character.
func (r Run) location(f Finding) (file string, line, col int) {
	file, _, _ = strings.Cut(f.Source, "#")
	line, col = f.Line, 0
	if line > 0 {
		col = 1
		if text, ok := r.Sources[file]; ok {
			lines := strings.Split(string(text), "\n")
			if line <= len(lines) {
				l := lines[line-1]
				col = len(l) - len(strings.TrimLeft(l, " \t-")) + 1
			}
		}
	}
	return file, line, col
}

// sarif* are the parts of SARIF 2.1.0 a report uses.
type sarifLog struct {
	Schema  string     `json:"$schema"`
	Version string     `json:"version"`
	Runs    []sarifRun `json:"runs"`
}

type sarifRun struct {
	Tool    sarifTool     `json:"tool"`
	Results []sarifResult `json:"results"`
}

type sarifTool struct {
	Driver sarifDriver `json:"driver"`
}

type sarifDriver struct {
	Name           string      `json:"name"`
	InformationURI string      `json:"informationUri"`
	Version        string      `json:"version,omitempty"`
	Rules          []sarifRule `json:"rules"`
}

type sarifText struct {
	Text string `json:"text"`
}

type sarifRule struct {
	ID                   string       `json:"id"`
	ShortDescription     sarifText    `json:"shortDescription"`
	Help                 sarifText    `json:"help"`
	DefaultConfiguration sarifDefault `json:"defaultConfiguration"`
}

type sarifDefault struct {
	Level string `json:"level"`
}

type sarifResult struct {
	RuleID       string             `json:"ruleId"`
	RuleIndex    int                `json:"ruleIndex"`
	Level        string             `json:"level"`
	Message      sarifText          `json:"message"`
	Locations    []sarifLocation    `json:"locations"`
	Suppressions []sarifSuppression `json:"suppressions,omitempty"`
}

type sarifLocation struct {
	PhysicalLocation sarifPhysical  `json:"physicalLocation"`
	LogicalLocations []sarifLogical `json:"logicalLocations,omitempty"`
}

type sarifPhysical struct {
	ArtifactLocation sarifArtifact `json:"artifactLocation"`
	Region           *sarifRegion  `json:"region,omitempty"`
}

type sarifArtifact struct {
	URI       string `json:"uri"`
	URIBaseID string `json:"uriBaseId,omitempty"`
}

// artifact is a file as SARIF names it: a URI relative to the directory
// lint ran in (%SRCROOT%, which code scanning maps to the repository),
// else an absolute file URI.
func artifact(file string) sarifArtifact {
	if file == "" || file == "stdin" {
		return sarifArtifact{URI: file}
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		return sarifArtifact{URI: (&url.URL{Path: filepath.ToSlash(file)}).String()}
	}
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, abs); err == nil && !strings.HasPrefix(rel, "..") {
			return sarifArtifact{URI: (&url.URL{Path: filepath.ToSlash(rel)}).String(), URIBaseID: "%SRCROOT%"}
		}
	}
	return sarifArtifact{URI: (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String()}
}

type sarifRegion struct {
	StartLine   int `json:"startLine"`
	StartColumn int `json:"startColumn"`
}

type sarifLogical struct {
	Name               string `json:"name"`
	FullyQualifiedName string `json:"fullyQualifiedName,omitempty"`
	Kind               string `json:"kind"`
}

type sarifSuppression struct {
	Kind          string `json:"kind"`
	Justification string `json:"justification,omitempty"`
}

func sarifLevel(s Severity) string {
	if s == SeverityError {
		return "error"
	}
	return "warning"
}

// WriteSARIF writes the run as a SARIF 2.1.0 log: every finding a result
// with its rule, level, message, file, line and column; every rule in
// tool.driver.rules with its help; a suppressed finding a result with its
// suppression.
func WriteSARIF(w io.Writer, r Run) error {
	driver := sarifDriver{Name: "gridweave-lint", InformationURI: "https://gridweave.dev/docs/lint", Version: r.ToolVersion}
	index := map[string]int{}
	for _, rule := range Rules() {
		index[rule.ID] = len(driver.Rules)
		driver.Rules = append(driver.Rules, sarifRule{ID: rule.ID, ShortDescription: sarifText{rule.Help},
			Help:                 sarifText{rule.Help + " Silence one finding with `# gridweave-lint: ignore=" + rule.ID + " <reason>` on its line."},
			DefaultConfiguration: sarifDefault{sarifLevel(rule.Severity)}})
	}
	result := func(f Finding) sarifResult {
		file, line, col := r.location(f)
		msg := f.Message
		if f.Path != "" {
			msg = f.Path + ": " + msg
		}
		if f.Fix != "" {
			msg += " (fix: " + f.Fix + ")"
		}
		loc := sarifLocation{PhysicalLocation: sarifPhysical{ArtifactLocation: artifact(file)},
			LogicalLocations: []sarifLogical{{Name: f.Object, FullyQualifiedName: f.Object + pathSuffix(f.Path), Kind: "object"}}}
		if line > 0 {
			loc.PhysicalLocation.Region = &sarifRegion{StartLine: line, StartColumn: col}
		}
		return sarifResult{RuleID: f.ID, RuleIndex: index[f.ID], Level: sarifLevel(f.Severity), Message: sarifText{msg}, Locations: []sarifLocation{loc}}
	}
	run := sarifRun{Tool: sarifTool{Driver: driver}, Results: []sarifResult{}}
	for _, f := range r.Findings {
		run.Results = append(run.Results, result(f))
	}
	for _, s := range r.Suppressed {
		res := result(s.Finding)
		kind := "inSource"
		if s.By == "config" {
			kind = "external"
		}
		res.Suppressions = []sarifSuppression{{Kind: kind, Justification: s.Reason}}
		run.Results = append(run.Results, res)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(sarifLog{Schema: "https://json.schemastore.org/sarif-2.1.0.json", Version: "2.1.0", Runs: []sarifRun{run}})
}

func pathSuffix(p string) string {
	if p == "" {
		return ""
	}
	return " " + p
}

// junit* are the JUnit XML report's elements (Ant's and Jenkins's format).
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Errors   int         `xml:"errors,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string         `xml:"name,attr"`
	ClassName string         `xml:"classname,attr"`
	Failures  []junitFailure `xml:"failure"`
	SystemOut string         `xml:"system-out,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

// WriteJUnit writes the run as a JUnit XML report: a test suite per file,
// a test case per object, a failure per error; warnings and suppressed
// findings go to the case's system-out.
func WriteJUnit(w io.Writer, r Run) error {
	type key struct{ source, object string }
	bySource := map[key][]Finding{}
	for _, f := range r.Findings {
		bySource[key{f.Source, f.Object}] = append(bySource[key{f.Source, f.Object}], f)
	}
	suppressed := map[key][]Suppressed{}
	for _, s := range r.Suppressed {
		suppressed[key{s.Source, s.Object}] = append(suppressed[key{s.Source, s.Object}], s)
	}
	objects := slices.Clone(r.Objects)
	// Findings of no object linted (a config's, a comment's) get a case.
	seen := map[key]bool{}
	for _, o := range objects {
		seen[key{o.Source, o.Object}] = true
	}
	for _, f := range r.Findings {
		if k := (key{f.Source, f.Object}); !seen[k] {
			seen[k] = true
			objects = append(objects, ObjectRef{Source: f.Source, Object: f.Object})
		}
	}
	out := junitSuites{Name: "gridweave-lint"}
	suiteOf := map[string]int{}
	for _, o := range objects {
		file, _, _ := strings.Cut(o.Source, "#")
		i, ok := suiteOf[file]
		if !ok {
			i = len(out.Suites)
			suiteOf[file] = i
			out.Suites = append(out.Suites, junitSuite{Name: file})
		}
		c := junitCase{Name: o.Object, ClassName: o.Source}
		var notes []string
		for _, f := range bySource[key{o.Source, o.Object}] {
			if f.Severity == SeverityError {
				c.Failures = append(c.Failures, junitFailure{Message: f.Message, Type: f.ID, Text: f.String()})
			} else {
				notes = append(notes, f.String())
			}
		}
		for _, s := range suppressed[key{o.Source, o.Object}] {
			notes = append(notes, fmt.Sprintf("suppressed (%s: %s): %s", s.By, s.Reason, s.Finding.String()))
		}
		c.SystemOut = strings.Join(notes, "\n")
		s := &out.Suites[i]
		s.Cases = append(s.Cases, c)
		s.Tests++
		out.Tests++
		if len(c.Failures) > 0 {
			s.Failures++
			out.Failures++
		}
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// WriteGitHub writes each finding as a GitHub Actions workflow command
// (::error or ::warning with file, line, col and title), which the
// workflow shows as an annotation on the line.
func WriteGitHub(w io.Writer, r Run) error {
	for _, f := range r.Findings {
		file, line, col := r.location(f)
		props := []string{"file=" + escapeProperty(file)}
		if line > 0 {
			props = append(props, fmt.Sprintf("line=%d", line), fmt.Sprintf("col=%d", col))
		}
		title := f.ID
		if !strings.HasPrefix(f.Object, "(") {
			title += " (" + f.Object + ")"
		}
		props = append(props, "title="+escapeProperty(title))
		msg := f.Message
		if f.Path != "" {
			msg = f.Path + ": " + msg
		}
		if f.Fix != "" {
			msg += " (fix: " + f.Fix + ")"
		}
		if _, err := fmt.Fprintf(w, "::%s %s::%s\n", sarifLevel(f.Severity), strings.Join(props, ","), escapeData(msg)); err != nil {
			return err
		}
	}
	return nil
}

func escapeData(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
}

func escapeProperty(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C").Replace(s)
}
