package validation

import (
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"gridweave.dev/manifest/internal/yamlstream"
)

// Lint validates objects (Validator) and adds the Ray-aware rules: it
// works on any objects a user hands in, not only on rendered ones. The
// documents are checked in parallel, one worker per CPU; the findings are
// sorted, so the result does not depend on the order they were found in.
func Lint(v *Validator, docs []Document) []Finding {
	perDoc := make([][]Finding, len(docs))
	var next atomic.Int64
	work := func() {
		for {
			i := int(next.Add(1) - 1)
			if i >= len(docs) {
				return
			}
			perDoc[i] = lintDocument(v, docs[i])
		}
	}
	workers := min(runtime.GOMAXPROCS(0), len(docs))
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
	var out []Finding
	for _, fs := range perDoc {
		out = append(out, fs...)
	}
	SortFindings(out)
	return out
}

// Documents hands out documents one at a time, io.EOF after the last
// (DocumentReader does).
type Documents interface {
	Next() (Document, error)
}

// LintReader lints documents as they are read, one worker per CPU,
// holding only the documents in flight: a stream of any size is linted in
// the memory of its largest document. It returns the findings, sorted as
// Lint sorts them, and how many documents were read; an error reading
// ends it.
func LintReader(v *Validator, r Documents) ([]Finding, int, error) {
	workers := runtime.GOMAXPROCS(0)
	docs := make(chan Document, 4*workers)
	var mu sync.Mutex
	var out []Finding
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for d := range docs {
				if fs := lintDocument(v, d); len(fs) > 0 {
					mu.Lock()
					out = append(out, fs...)
					mu.Unlock()
				}
			}
		})
	}
	n, err := func() (n int, err error) {
		defer close(docs) // the workers end, even if reading panics
		for {
			d, err := r.Next()
			if err == io.EOF {
				return n, nil
			}
			if err != nil {
				return n, err
			}
			n++
			docs <- d
		}
	}()
	wg.Wait()
	SortFindings(out)
	return out, n, err
}

// lintDocument is what Lint finds in one document. A panic in the
// libraries it calls becomes an internal finding on that document (Lint's
// workers are goroutines a caller could not recover in).
func lintDocument(v *Validator, d Document) (fs []Finding) {
	defer func() {
		if r := recover(); r != nil {
			fs = []Finding{{ID: "internal", Severity: SeverityError, Source: d.Source, Object: "(document)",
				Message: fmt.Sprintf("checking this document failed: %v", r)}}
		}
	}()
	if d.Err != nil {
		return []Finding{{ID: "parse", Severity: SeverityError, Source: d.Source, Object: "(document)", Message: d.Err.Error()}}
	}
	fs = v.Validate(d.Object)
	fs = append(fs, rayFindings(d.Object)...)
	for i := range fs {
		fs[i].Source = d.Source
		if d.Lines != nil {
			fs[i].Line = lineOf(d.Lines, fs[i].Path)
			if block, ok := d.Lines[fs[i].embeddedIn+yamlstream.LiteralBlock]; ok && fs[i].embeddedLine > 0 {
				// A line of YAML embedded in a literal block: the block's
				// line k is k lines below its indicator. (Elsewhere — a
				// quoted or folded string — the key's line stands.)
				fs[i].Line = block + fs[i].embeddedLine
			}
		}
	}
	return fs
}

// lineOf is the line of path, or of its nearest ancestor that has one
// (a finding may name a field the document leaves out).
func lineOf(lines map[string]int, path string) int {
	for {
		if line, ok := lines[path]; ok {
			return line
		}
		if path == "" {
			return 0
		}
		cut := max(strings.LastIndexByte(path, '.'), strings.LastIndexByte(path, '['))
		if cut < 0 {
			path = ""
		} else {
			path = path[:cut]
		}
	}
}
