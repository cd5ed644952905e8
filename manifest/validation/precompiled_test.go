package validation

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"gotest.tools/v3/golden"
)

// TestPrecompiledMatchesCRDs keeps precompiled/ what the verbatim CRDs in
// crds/ compile to (regenerate with go generate ./manifest/validation/, which
// runs this test with -update): the bytes are the same, and decoding them
// gives fast paths deeply equal to those compiled from the CRDs.
func TestPrecompiledMatchesCRDs(t *testing.T) {
	files, err := fs.Glob(embeddedCRDs, "crds/*.yaml")
	if err != nil || len(files) < 10 {
		t.Fatalf("%d embedded CRDs (%v)", len(files), err)
	}
	want := map[string]bool{}
	for _, name := range files {
		compiled, err := compileCRD(name)
		if err != nil || len(compiled) == 0 {
			t.Fatalf("%s: %d versions (%v)", name, len(compiled), err)
		}
		data, err := encodePrecompiled(compiled)
		if err != nil {
			t.Fatal(err)
		}
		path := precompiledName(name)
		want[path] = true
		if golden.FlagUpdate() {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		embedded, err := precompiledFS.ReadFile(path)
		if err != nil || !bytes.Equal(embedded, data) {
			t.Errorf("%s differs from what %s compiles to (%v); run go generate ./manifest/validation/", path, name, err)
			continue
		}
		decoded, err := decodePrecompiled(embedded, name)
		if err != nil {
			t.Fatal(err)
		}
		if len(decoded) != len(compiled) {
			t.Errorf("%s: %d versions decoded, %d compiled", name, len(decoded), len(compiled))
		}
		for gvk, c := range compiled {
			d := decoded[gvk]
			if d == nil {
				t.Errorf("%s: %s not decoded", name, gvk)
				continue
			}
			if !reflect.DeepEqual(d.plan, c.plan) || !reflect.DeepEqual(d.root, c.root) {
				t.Errorf("%s %s: the decoded structural plan differs from the compiled one", name, gvk)
			}
			if !reflect.DeepEqual(d.check, c.check) {
				t.Errorf("%s %s: the decoded schema check differs from the compiled one", name, gvk)
			}
			if d.namespaced != c.namespaced || d.statusSubresource != c.statusSubresource || d.embedded != c.embedded || d.hasCELRules != c.hasCELRules {
				t.Errorf("%s %s: decoded flags %v %v %v %v, compiled %v %v %v %v", name, gvk,
					d.namespaced, d.statusSubresource, d.embedded, d.hasCELRules, c.namespaced, c.statusSubresource, c.embedded, c.hasCELRules)
			}
		}
	}
	if golden.FlagUpdate() {
		return
	}
	stored, _ := fs.Glob(precompiledFS, "precompiled/*")
	for _, path := range stored {
		if !want[path] {
			t.Errorf("%s: no embedded CRD compiles to it; remove it", path)
		}
	}
}

// TestPrecompiledDecodeRefusesDamage: a truncated or altered precompiled
// file is an error (or, for a change that keeps it well formed, other
// values), never a panic.
func TestPrecompiledDecodeRefusesDamage(t *testing.T) {
	const name = "crds/ray.io_rayclusters.yaml"
	data, err := precompiledFS.ReadFile(precompiledName(name))
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < len(data); n += 1 + n/50 {
		if _, err := decodePrecompiled(data[:n], name); err == nil {
			t.Fatalf("truncated to %d of %d bytes: no error", n, len(data))
		}
	}
	for i := len(precompiledMagic); i < len(data); i += 7 {
		altered := bytes.Clone(data)
		altered[i] ^= 0xff
		decodePrecompiled(altered, name) // must not panic
	}
}
