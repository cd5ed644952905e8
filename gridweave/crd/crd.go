package crd

import (
	"context"
	"embed"
	"fmt"
	"io/fs"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"gridweave.dev/rayctl"
)

// Bases holds the generated CRDs: bases/gridweave.dev_<plural>.yaml.
//
//go:embed bases/*.yaml
var Bases embed.FS

// Objects are the CRDs, ready to apply.
func Objects() ([]*unstructured.Unstructured, error) {
	files, err := fs.Glob(Bases, "bases/*.yaml")
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, f := range files {
		raw, err := Bases.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var obj map[string]any
		if err := yaml.Unmarshal(raw, &obj); err != nil {
			return nil, fmt.Errorf("crd: %s: %w", f, err)
		}
		out = append(out, &unstructured.Unstructured{Object: obj})
	}
	return out, nil
}

// Install server-side-applies the CRDs (field manager gridweave) and waits
// until the API server serves them. rc needs a dynamic client
// (rayctl.Client.WithDynamic).
func Install(ctx context.Context, rc *rayctl.Client) error {
	objs, err := Objects()
	if err != nil {
		return err
	}
	if _, err := rc.Apply(ctx, objs, rayctl.ApplyOptions{Force: true}); err != nil {
		return fmt.Errorf("crd: install: %w", err)
	}
	return nil
}
