package manifest_test

import (
	"path/filepath"
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

// BenchmarkValidateDeployment validates one built-in object.
func BenchmarkValidateDeployment(b *testing.B) {
	docs := lintDocs(b, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  selector: {matchLabels: {app: a}}\n  template:\n    metadata: {labels: {app: a}}\n    spec: {containers: [{name: c, image: i}]}\n")
	v := manifest.NewValidator()
	for b.Loop() {
		v.Validate(docs[0].Object)
	}
}
