package manifest_test

import (
	"path/filepath"
	"strings"
	"testing"

	"gridweave.dev/manifest"
)

// BenchmarkRenderAndValidateGRPO renders the full grpo_swe job and
// validates every object in process (the Validator is warm).
func BenchmarkRenderAndValidateGRPO(b *testing.B) {
	r, err := manifest.LoadRecipe(filepath.Join(specs, "grpo_swe.recipe.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	in, err := manifest.LoadInfra(filepath.Join(specs, "grpo_swe.infra.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	v := manifest.NewValidator()
	objs, _ := manifest.Render(r, in)
	for _, o := range objs {
		v.Validate(o)
	}
	for b.Loop() {
		objs, err := manifest.Render(r, in)
		if err != nil {
			b.Fatal(err)
		}
		for _, o := range objs {
			if fs := v.Validate(o); manifest.HasErrors(fs) {
				b.Fatal(fs)
			}
		}
	}
}

// BenchmarkValidate validates, in steady state, each object of the golden
// files (the rendered grpo_swe job and bring-up, the RayService chart):
// one sub-benchmark per file and kind, so ns/op is the time per object.
func BenchmarkValidate(b *testing.B) {
	files, _ := filepath.Glob("testdata/*.yaml")
	v := manifest.NewValidator()
	for _, file := range files {
		docs, err := manifest.LoadDocuments(file)
		if err != nil {
			b.Fatal(err)
		}
		for _, d := range docs {
			o := d.Object
			name := strings.TrimSuffix(filepath.Base(file), ".yaml") + "/" + o.GetKind() + "/" + o.GetName()
			b.Run(name, func(b *testing.B) {
				if fs := v.Validate(o); manifest.HasErrors(fs) {
					b.Fatal(fs)
				}
				for b.Loop() {
					v.Validate(o)
				}
			})
		}
	}
}

// BenchmarkValidateObject validates one RayCluster (head + GPU group) in
// steady state.
func BenchmarkValidateObject(b *testing.B) {
	docs := lintDocs(b, rayClusterDoc("bench"))
	v := manifest.NewValidator()
	v.Validate(docs[0].Object)
	for b.Loop() {
		if fs := v.Validate(docs[0].Object); manifest.HasErrors(fs) {
			b.Fatal(fs)
		}
	}
}

// BenchmarkLintUsersCorpus lints testdata/users (97+ documents of every
// kind, most with a mistake) in steady state; objects/s is the throughput
// of `lint` on users' YAML, errors included.
func BenchmarkLintUsersCorpus(b *testing.B) {
	files, _ := filepath.Glob("testdata/users/*.yaml")
	var docs []manifest.Document
	for _, file := range files {
		d, err := manifest.LoadDocuments(file)
		if err != nil {
			b.Fatal(err)
		}
		docs = append(docs, d...)
	}
	v := manifest.NewValidator()
	manifest.Lint(v, docs)
	for b.Loop() {
		manifest.Lint(v, docs)
	}
	b.ReportMetric(float64(b.N*len(docs))/b.Elapsed().Seconds(), "objects/s")
}

// BenchmarkValidateGatewayAPI validates the valid Gateway API objects of
// the users' corpus: their CRDs carry many CEL rules, which the API
// server's evaluator runs on every route rule and match.
func BenchmarkValidateGatewayAPI(b *testing.B) {
	docs, err := manifest.LoadDocuments("testdata/users/gateway.yaml")
	if err != nil {
		b.Fatal(err)
	}
	v := manifest.NewValidator()
	for _, d := range docs {
		if manifest.HasErrors(v.Validate(d.Object)) {
			continue
		}
		b.Run(d.Object.GetKind()+"/"+d.Object.GetName(), func(b *testing.B) {
			for b.Loop() {
				v.Validate(d.Object)
			}
		})
	}
}
