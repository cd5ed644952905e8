// Package manifest turns launcher specs (a recipe and an infra spec) and the
// RayService chart's values into hardened Kubernetes objects in apply order.
// It is pure: it never talks to a cluster.
//
// # Pieces
//
//   - specs.go, strict.go, validate_specs.go: the recipe and infra spec,
//     parsed strictly (a wrong key or type is a *SpecError with file, line
//     and path; the strict YAML walk is internal/strictyaml's, shared with
//     the validation package; generic values are written as JSON by
//     internal/jsontree, byte for byte as encoding/json writes them but
//     without reflection).
//   - render.go, chart.go: Render and RenderChart, deterministic bytes.
//
// Validating objects — the API server's semantics in process, KubeRay's
// rules, Ray-aware lint — is package gridweave.dev/manifest/validation;
// `launcher check` composes the two: Render, then validation.Lint.
package manifest
