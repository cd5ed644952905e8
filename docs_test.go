package gridweave_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// testCommand finds the test runs the docs name: a `-run` or `-bench`
// pattern (quoted or not) followed, after other flags, by the package
// paths, as in `go test -run 'TestA|TestB' -v ./gridweave/` or a table
// cell's `-run TestC ./examples/server/`.
var testCommand = regexp.MustCompile(`-(run|bench) +('[^']*'|"[^"]*"|\S+)((?: +-\S+(?: +\d+\w*)?)*)((?: +\./[\w./-]*)+)`)

// TestDocsNameTestsThatExist: every test or benchmark the README and
// docs/ tell a reader to run exists in the package they name, so a
// renamed or moved test fails here rather than in a reader's terminal.
func TestDocsNameTestsThatExist(t *testing.T) {
	docs, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, doc := range append(docs, "README.md") {
		raw, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		// A command may wrap: a code span's line break is a space.
		text := strings.Join(strings.Fields(string(raw)), " ")
		for _, m := range testCommand.FindAllStringSubmatch(text, -1) {
			kind, pattern := m[1], strings.Trim(m[2], `'"`)
			if pattern == "^$" || pattern == "." {
				continue
			}
			funcs := map[string]bool{}
			for _, pkg := range strings.Fields(m[4]) {
				found, err := testFuncs(pkg)
				if err != nil {
					t.Errorf("%s names %s: %v", doc, pkg, err)
					continue
				}
				for name := range found {
					funcs[name] = true
				}
			}
			prefix := map[string]string{"run": "Test", "bench": "Benchmark"}[kind]
			// A pattern's first element selects the top-level function;
			// the rest (after '/') are subtests. Each alternative of it
			// must name a function: a removed one fails even when the
			// others are there.
			top, _, _ := strings.Cut(pattern, "/")
			for _, alternative := range alternatives(top) {
				re, err := regexp.Compile(alternative)
				if err != nil {
					t.Errorf("%s: -%s %q is not a regular expression: %v", doc, kind, pattern, err)
					continue
				}
				matched := false
				for name := range funcs {
					if strings.HasPrefix(name, prefix) && re.MatchString(name) {
						matched = true
						break
					}
				}
				if !matched {
					t.Errorf("%s: -%s %q (%q) %s matches no %s function there", doc, kind, pattern, alternative, strings.TrimSpace(m[4]), prefix)
				}
			}
			checked++
		}
	}
	if checked < 40 {
		t.Fatalf("checked %d commands in the docs: the pattern no longer finds them", checked)
	}
	t.Logf("%d test commands in the README and docs/ name tests that exist", checked)
}

// alternatives splits a regular expression at its top-level '|' (not
// those inside parentheses).
func alternatives(re string) []string {
	var out []string
	depth, start := 0, 0
	for i, c := range re {
		switch c {
		case '(':
			depth++
		case ')':
			depth--
		case '|':
			if depth == 0 {
				out = append(out, re[start:i])
				start = i + 1
			}
		}
	}
	return append(out, re[start:])
}

// testFuncs are the names of the functions in the test files of the
// package at path (./dir/, or ./dir/... for every package beneath).
func testFuncs(path string) (map[string]bool, error) {
	dir, recursive := strings.CutSuffix(path, "...")
	dir = filepath.Clean(dir)
	info, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return nil, os.ErrNotExist
	}
	funcs := map[string]bool{}
	walk := func(file string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if file != dir && (!recursive || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(file, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv == nil {
				funcs[fn.Name.Name] = true
			}
		}
		return nil
	}
	return funcs, filepath.WalkDir(dir, walk)
}
