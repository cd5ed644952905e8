package api

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"
)

// TestEveryErrorCodeHasItsStatus: each Code constant is in ErrorCodes
// once, with a 4xx or 5xx status.
func TestEveryErrorCodeHasItsStatus(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "errorcodes.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	constants := 0
	for _, decl := range f.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.CONST {
			continue
		}
		for _, spec := range gen.Specs {
			v := spec.(*ast.ValueSpec)
			for i, name := range v.Names {
				if !strings.HasPrefix(name.Name, "Code") {
					continue
				}
				constants++
				code, err := strconv.Unquote(v.Values[i].(*ast.BasicLit).Value)
				if err != nil {
					t.Fatal(err)
				}
				if status := ErrorStatus[code]; status < 400 || status > 599 {
					t.Errorf("%s (%q) has status %d in ErrorCodes, want a 4xx or 5xx", name.Name, code, status)
				}
			}
		}
	}
	if constants != len(ErrorCodes) || len(ErrorStatus) != len(ErrorCodes) {
		t.Errorf("%d Code constants, %d ErrorCodes, %d distinct codes: each constant is listed once", constants, len(ErrorCodes), len(ErrorStatus))
	}
}
