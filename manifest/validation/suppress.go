package validation

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// Suppressions silence findings on purpose, in two ways:
//
//   - a comment in the YAML, `# gridweave-lint: ignore=<rule-id>[,<rule-id>…] <reason>`,
//     on the line of the finding, or in the comments at the top of a
//     document (before its first key), where it applies to that
//     document's object;
//   - a config file, ConfigFile, found from the current directory upward
//     (or named): rules turned off or given another severity, paths left
//     out.
//
// Any finding may be suppressed, errors included. A suppression without a
// reason, or naming a rule that does not exist, is itself a warning.

// ConfigFile is the name of the lint config file.
const ConfigFile = ".gridweave-lint.yaml"

// Config is the lint config file.
type Config struct {
	// Rules maps a rule id to off (its findings are suppressed), warning
	// or error (its findings get that severity).
	Rules map[string]RuleSetting `json:"rules,omitempty"`
	// Exclude lists paths left out of lint: globs (filepath.Match) relative
	// to the config file's directory; a pattern that names a directory
	// leaves out everything under it.
	Exclude []string `json:"exclude,omitempty"`
	// Path is where the config was read from.
	Path string `json:"-"`
}

// RuleSetting is a rule's setting in the config: off, warning or error.
// YAML reads a bare off as false; that is off too.
type RuleSetting string

// UnmarshalJSON takes a string, or false for off.
func (r *RuleSetting) UnmarshalJSON(data []byte) error {
	switch string(data) {
	case "false":
		*r = "off"
		return nil
	case "true":
		*r = "true"
		return nil
	}
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("want off, warning or error, got %s", data)
	}
	if s == "false" { // a bare off, which YAML reads as false, given as text
		s = "off"
	}
	*r = RuleSetting(s)
	return nil
}

// FindConfig looks for ConfigFile in dir and its parents; "" when there is
// none.
func FindConfig(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, ConfigFile)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", nil
		}
		dir = parent
	}
}

// LoadConfig reads a config file strictly: an unknown key or a rule
// setting other than off, warning or error is an error naming it.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c := &Config{}
	if err := yaml.UnmarshalStrict(data, c); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, id := range slices.Sorted(maps.Keys(c.Rules)) {
		switch c.Rules[id] {
		case "off", "warning", "error":
		default:
			return nil, fmt.Errorf("%s: rules.%s: %q is not off, warning or error", path, id, c.Rules[id])
		}
	}
	for i, p := range c.Exclude {
		if _, err := filepath.Match(p, ""); err != nil {
			return nil, fmt.Errorf("%s: exclude[%d]: %q: %w", path, i, p, err)
		}
		if strings.Contains(p, "**") || filepath.IsAbs(p) {
			return nil, fmt.Errorf("%s: exclude[%d]: %q: patterns are relative to the config's directory and match one path element per * (a directory's pattern leaves out everything under it); ** and absolute paths match nothing", path, i, p)
		}
	}
	c.Path = path
	return c, nil
}

// Excluded reports whether path is left out by the config.
func (c *Config) Excluded(path string) bool {
	if c == nil || len(c.Exclude) == 0 {
		return false
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return false
	}
	rel, err := filepath.Rel(filepath.Dir(c.Path), abs)
	if err != nil || strings.HasPrefix(rel, "..") {
		return false
	}
	for _, p := range c.Exclude {
		p = filepath.Clean(p)
		if ok, _ := filepath.Match(p, rel); ok || rel == p || strings.HasPrefix(rel, p+string(filepath.Separator)) {
			return true
		}
		// A pattern matches a directory above the file, too.
		for dir := filepath.Dir(rel); dir != "." && dir != "/"; dir = filepath.Dir(dir) {
			if ok, _ := filepath.Match(p, dir); ok {
				return true
			}
		}
	}
	return false
}

// Suppressed is a finding a suppression silenced, and why.
type Suppressed struct {
	Finding
	// By is "comment" or "config".
	By     string `json:"by"`
	Reason string `json:"reason,omitempty"`
}

// directive is one suppression comment.
var directive = regexp.MustCompile(`#\s*gridweave-lint:\s*ignore=([A-Za-z0-9,_-]*)\s*(.*)$`)

// fileSuppressions are the suppression comments of one file.
type fileSuppressions struct {
	// onLine maps a line to the rule ids its comment names (with reasons).
	onLine map[int]map[string]string
	// docOf maps each line to its document's number (1-based, counting
	// documents that hold something), header those numbers to the ids
	// their top comments name.
	docOf  []int
	header map[int]map[string]string
	// problems are the comments' own findings.
	problems []Finding
}

func parseSuppressions(file string, text []byte) fileSuppressions {
	lines := strings.Split(string(bytes.ReplaceAll(text, []byte("\r\n"), []byte("\n"))), "\n")
	s := fileSuppressions{onLine: map[int]map[string]string{}, docOf: make([]int, len(lines)+1), header: map[int]map[string]string{}}
	// Documents are numbered as the reader numbers them: a --- line ends
	// the document when it began with its own --- or holds something (so
	// an empty document between two --- counts, and comments before a
	// first --- belong to the document after it).
	doc, explicit, content := 1, false, false
	pending := map[string]string{} // top comments of the document
	for i, line := range lines {
		n := i + 1
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(line, "---") && (len(line) == 3 || line[3] == ' ' || line[3] == '\t') {
			if explicit || content {
				doc, content, pending = doc+1, false, map[string]string{}
			}
			explicit = true
			s.docOf[n] = doc
			continue
		}
		ids := map[string]string{}
		if m := directive.FindStringSubmatch(line); m != nil && (strings.HasPrefix(trimmed, "#") || strings.Contains(line, " #") || strings.Contains(line, "\t#")) {
			reason := strings.TrimSpace(m[2])
			for _, id := range strings.Split(m[1], ",") {
				if id == "" {
					continue
				}
				ids[id] = reason
				if _, ok := RuleByID(id); !ok {
					s.problems = append(s.problems, Finding{ID: RuleSuppressionUnknownRule, Severity: SeverityWarning, Source: file, Line: n, Object: "(comment)",
						Message: fmt.Sprintf("the suppression names %q, which is no rule", id), Fix: "see launcher lint --list-rules"})
				}
			}
			if reason == "" {
				s.problems = append(s.problems, Finding{ID: RuleSuppressionWithoutReason, Severity: SeverityWarning, Source: file, Line: n, Object: "(comment)",
					Message: "the suppression gives no reason", Fix: "say why after the rule id: # gridweave-lint: ignore=<rule-id> <reason>"})
			}
			s.onLine[n] = ids
		}
		blank := trimmed == "" || strings.HasPrefix(trimmed, "#")
		if !blank && !content {
			content = true
			if len(pending) > 0 {
				s.header[doc] = pending
			}
		}
		if !content && strings.HasPrefix(trimmed, "#") {
			maps.Copy(pending, ids)
		}
		s.docOf[n] = doc
	}
	return s
}

// Suppress applies the suppression comments of the sources (file name →
// its text; findings of sources not there keep only the config's
// suppressions) and the config (nil for none). It returns the findings
// kept, with the severities the config gives and the suppressions' own
// warnings added, and the findings suppressed.
func Suppress(findings []Finding, sources map[string][]byte, cfg *Config) (kept []Finding, suppressed []Suppressed) {
	parsed := map[string]fileSuppressions{}
	for file, text := range sources {
		p := parseSuppressions(file, text)
		parsed[file] = p
		findings = append(slices.Clone(findings), p.problems...) // the config applies to them too
	}
	if cfg != nil {
		for _, id := range slices.Sorted(maps.Keys(cfg.Rules)) {
			if _, ok := RuleByID(id); !ok {
				kept = append(kept, Finding{ID: RuleSuppressionUnknownRule, Severity: SeverityWarning, Source: cfg.Path, Object: "(config)",
					Path: "rules." + id, Message: fmt.Sprintf("%q is no rule", id), Fix: "see launcher lint --list-rules"})
			}
		}
	}
	for _, f := range findings {
		file, rest, _ := strings.Cut(f.Source, "#")
		if p, ok := parsed[file]; ok {
			if reason, ok := p.onLine[f.Line][f.ID]; ok && f.Line > 0 {
				suppressed = append(suppressed, Suppressed{Finding: f, By: "comment", Reason: reason})
				continue
			}
			doc := 0
			if f.Line > 0 && f.Line < len(p.docOf) {
				doc = p.docOf[f.Line]
			} else if n, err := leadingNumber(rest); err == nil {
				doc = n
			}
			if reason, ok := p.header[doc][f.ID]; ok {
				suppressed = append(suppressed, Suppressed{Finding: f, By: "comment", Reason: reason})
				continue
			}
		}
		if cfg != nil {
			switch cfg.Rules[f.ID] {
			case "off":
				suppressed = append(suppressed, Suppressed{Finding: f, By: "config", Reason: cfg.Path})
				continue
			case "warning":
				f.Severity = SeverityWarning
			case "error":
				f.Severity = SeverityError
			}
		}
		kept = append(kept, f)
	}
	SortFindings(kept)
	return kept, suppressed
}

func leadingNumber(s string) (int, error) {
	n, i := 0, 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		n = n*10 + int(s[i]-'0')
		i++
	}
	if i == 0 {
		return 0, errors.New("no number")
	}
	return n, nil
}
