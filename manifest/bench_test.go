package manifest_test

import (
	"path/filepath"
	"testing"

	"gridweave.dev/manifest"
	"gridweave.dev/manifest/validation"
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
	v := validation.NewValidator()
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
			if fs := v.Validate(o); validation.HasErrors(fs) {
				b.Fatal(fs)
			}
		}
	}
}
