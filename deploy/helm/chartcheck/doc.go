// Package chartcheck holds the RayService Helm chart (deploy/helm/rayservice)
// to the launcher's Go renderer: a module of its own, because Helm's engine
// needs newer Kubernetes modules than the rest of the repository pins. Its
// test renders the chart with Helm's own engine and compares it, object by
// object, with `launcher chart render` over the example values and every
// combination of the chart's switches, runs Helm's linter, and holds
// values.schema.json to `launcher schema chart-values`.
package chartcheck
