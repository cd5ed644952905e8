package validation_test

import (
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"gridweave.dev/manifest/validation"
)

// BenchmarkValidate validates, in steady state, each object of the golden
// files (the rendered grpo_swe job and bring-up, the RayService chart):
// one sub-benchmark per file and kind, so ns/op is the time per object.
// Before the fast paths (schemacheck.go and the others), the library's own
// walks alone took 0.2 ms for the chart's RayService.
func BenchmarkValidate(b *testing.B) {
	files, _ := filepath.Glob("../testdata/*.yaml")
	v := validation.NewValidator()
	for _, file := range files {
		docs, err := validation.LoadDocuments(file)
		if err != nil {
			b.Fatal(err)
		}
		for _, d := range docs {
			o := d.Object
			name := strings.TrimSuffix(filepath.Base(file), ".yaml") + "/" + o.GetKind() + "/" + o.GetName()
			b.Run(name, func(b *testing.B) {
				if fs := v.Validate(o); validation.HasErrors(fs) {
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
	v := validation.NewValidator()
	v.Validate(docs[0].Object)
	for b.Loop() {
		if fs := v.Validate(docs[0].Object); validation.HasErrors(fs) {
			b.Fatal(fs)
		}
	}
}

// BenchmarkLintUsersCorpus lints testdata/users (97+ documents of every
// kind, most with a mistake) in steady state; objects/s is the throughput
// of `lint` on users' YAML, errors included.
func BenchmarkLintUsersCorpus(b *testing.B) {
	files, _ := filepath.Glob("testdata/users/*.yaml")
	var docs []validation.Document
	for _, file := range files {
		d, err := validation.LoadDocuments(file)
		if err != nil {
			b.Fatal(err)
		}
		docs = append(docs, d...)
	}
	v := validation.NewValidator()
	validation.Lint(v, docs)
	for b.Loop() {
		validation.Lint(v, docs)
	}
	b.ReportMetric(float64(b.N*len(docs))/b.Elapsed().Seconds(), "objects/s")
}

// BenchmarkValidateGatewayAPI validates the valid Gateway API objects of
// the users' corpus: their CRDs carry many CEL rules, which the API
// server's evaluator runs on every route rule and match.
func BenchmarkValidateGatewayAPI(b *testing.B) {
	docs, err := validation.LoadDocuments("testdata/users/gateway.yaml")
	if err != nil {
		b.Fatal(err)
	}
	v := validation.NewValidator()
	for _, d := range docs {
		if validation.HasErrors(v.Validate(d.Object)) {
			continue
		}
		b.Run(d.Object.GetKind()+"/"+d.Object.GetName(), func(b *testing.B) {
			for b.Loop() {
				v.Validate(d.Object)
			}
		})
	}
}

// BenchmarkValidateCold is the cost a fresh `launcher lint` process pays
// before its first answer: a new Validator validating its first RayCluster,
// RayJob or RayService (from the golden files), embedded CRDs loaded
// included. Goal: at most 5 ms each. Measured on a 2-core EPYC:
// RayCluster 0.45 ms / 315 KB / 4,086 allocations, RayJob 0.66 ms,
// RayService 0.60 ms; parsing the verbatim CRDs instead took about 100 ms.
func BenchmarkValidateCold(b *testing.B) {
	for _, c := range []struct{ kind, file string }{
		{"RayCluster", "../testdata/grpo_swe.sglang.bringup.yaml"},
		{"RayJob", "../testdata/grpo_swe.vllm.rayjob.yaml"},
		{"RayService", "../testdata/chart.plain.yaml"},
	} {
		docs, err := validation.LoadDocuments(c.file)
		if err != nil {
			b.Fatal(err)
		}
		var obj *unstructured.Unstructured
		for _, d := range docs {
			if d.Object.GetKind() == c.kind {
				obj = d.Object
			}
		}
		b.Run(c.kind, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if fs := validation.NewValidator().Validate(obj); validation.HasErrors(fs) {
					b.Fatal(fs)
				}
			}
		})
	}
}
