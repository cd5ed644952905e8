package validation_test

import (
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"gridweave.dev/manifest/validation"
)

// rayService is a RayService whose serveConfigV2 is the given block
// (indented under it); the block's first line is line 7 of the document.
func rayService(serveConfig string) string {
	var b strings.Builder
	b.WriteString("apiVersion: ray.io/v1\nkind: RayService\nmetadata:\n  name: serve\nspec:\n  serveConfigV2: |\n")
	for _, line := range strings.Split(strings.TrimSuffix(serveConfig, "\n"), "\n") {
		b.WriteString("    " + line + "\n")
	}
	b.WriteString("  rayClusterConfig:\n    rayVersion: \"2.52.0\"\n    headGroupSpec:\n      rayStartParams: {}\n      template:\n        spec:\n          containers:\n          - name: ray-head\n            image: rayproject/ray:2.52.0\n")
	return b.String()
}

// TestServeConfigHeldToRayServeSchema: serveConfigV2 is read as the
// operator reads it and held to Ray Serve's config schema; each problem
// is an error when Ray Serve refuses the config (the RayService never
// serves), a warning when it ignores a key (the setting has no effect),
// with the line of the offending key in the file.
func TestServeConfigHeldToRayServeSchema(t *testing.T) {
	const app = "applications:\n  - name: app\n    import_path: module.app\n"
	for _, c := range []struct {
		name, config, severity, path, message string
		line                                  int
	}{
		{"valid", app + "    route_prefix: /\n    deployments:\n      - name: D\n        num_replicas: 2\n        ray_actor_options: {num_cpus: 0.5}\n", "", "", "", 0},
		{"not YAML", "applications: [\n  - name: a\n", "error", "spec.serveConfigV2", "is not a YAML mapping the operator can read", 0},
		{"a list at the top", "- name: a\n", "error", "spec.serveConfigV2", "is not a YAML mapping the operator can read", 0},
		{"no applications", "proxy_location: EveryNode\n", "error", "spec.serveConfigV2.applications", "is required", 7},
		{"typo in a deployment", app + "    deployments:\n      - name: D\n        num_replica: 2\n", "warning", "spec.serveConfigV2.applications[0].deployments[0].num_replica", "ignores the key", 12},
		{"unknown top-level key", "proxy_locaton: HeadOnly\n" + app, "warning", "spec.serveConfigV2.proxy_locaton", "did you mean proxy_location?", 7},
		{"unknown logging key", "logging_config: {log_levle: DEBUG}\n" + app, "error", "spec.serveConfigV2.logging_config.log_levle", "refuses unknown fields", 7},
		{"bad proxy location", "proxy_location: Everywhere\n" + app, "error", "spec.serveConfigV2.proxy_location", "must be one of Disabled, HeadOnly, EveryNode", 7},
		{"route without slash", app + "    route_prefix: api\n", "error", "spec.serveConfigV2.applications[0].route_prefix", `does not start with "/"`, 10},
		{"import path", "applications:\n  - name: app\n    import_path: app\n", "error", "spec.serveConfigV2.applications[0].import_path", "names no module and attribute", 9},
		{"no import path", "applications:\n  - name: app\n", "error", "spec.serveConfigV2.applications[0].import_path", "is required", 8},
		{"local working_dir", app + "    runtime_env: {working_dir: ./src}\n", "error", "spec.serveConfigV2.applications[0].runtime_env", "a local path", 10},
		{"replicas and autoscaling", app + "    deployments:\n      - name: D\n        num_replicas: 2\n        autoscaling_config: {min_replicas: 1}\n", "error", "spec.serveConfigV2.applications[0].deployments[0].num_replicas", "together with autoscaling_config", 12},
		{"zero replicas", app + "    deployments:\n      - name: D\n        num_replicas: 0\n", "error", "spec.serveConfigV2.applications[0].deployments[0].num_replicas", "positive integer", 12},
		{"deployment without name", app + "    deployments:\n      - num_replicas: 1\n", "error", "spec.serveConfigV2.applications[0].deployments[0].name", "is required", 11},
		{"text for a number", app + "    deployments:\n      - name: D\n        max_ongoing_requests: many\n", "error", "spec.serveConfigV2.applications[0].deployments[0].max_ongoing_requests", "must be a number", 12},
		{"two apps one name", app + "    route_prefix: /a\n  - name: app\n    import_path: module.b\n    route_prefix: /b\n", "error", "spec.serveConfigV2.applications[1].name", "names two applications", 11},
		{"two apps one route", app + "  - name: b\n    import_path: module.b\n", "error", "spec.serveConfigV2.applications[1].route_prefix", "the route of two applications", 10},
		{"port per application", app + "    port: 8001\n", "error", "spec.serveConfigV2.applications[0].port", "per application", 10},
		{"target capacity", "target_capacity: 150\n" + app, "error", "spec.serveConfigV2.target_capacity", "between 0 and 100", 7},
		{"a float where an int goes (pydantic truncates)", app + "    deployments:\n      - name: D\n        max_ongoing_requests: 2.5\n", "", "", "", 0},
		{"merge keys", "defaults: &d {import_path: module.app}\napplications:\n  - <<: *d\n    name: app\n", "", "", "", 0},
		{"empty", "", "", "", "", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []validation.Finding
			for _, f := range lintString(t, rayService(c.config)) {
				if f.ID == "serve-config" {
					got = append(got, f)
				}
			}
			if c.severity == "" {
				if len(got) > 0 {
					t.Fatalf("want nothing, got %v", got)
				}
				return
			}
			if len(got) != 1 || string(got[0].Severity) != c.severity || got[0].Path != c.path || !strings.Contains(got[0].Message, c.message) || (c.line > 0 && got[0].Line != c.line) {
				t.Fatalf("want one %s at %s (line %d) saying %q, got %v", c.severity, c.path, c.line, c.message, got)
			}
		})
	}
}

// TestServeConfigsOfKubeRaySamples: every serveConfigV2 of the pinned
// KubeRay release's samples — configs known to serve — passes.
func TestServeConfigsOfKubeRaySamples(t *testing.T) {
	dir, err := moduleDir("github.com/ray-project/kuberay/ray-operator")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	err = filepath.WalkDir(filepath.Join(dir, "config", "samples"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".yaml") {
			return err
		}
		docs, err := validation.LoadDocuments(p)
		if err != nil {
			return err
		}
		for _, doc := range docs {
			if doc.Object == nil || doc.Object.GetKind() != "RayService" {
				continue
			}
			checked++
			for _, f := range validation.Lint(validator, []validation.Document{doc}) {
				if f.ID == "serve-config" {
					t.Errorf("%s: %s", doc.Source, f)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 5 {
		t.Fatalf("only %d RayService samples", checked)
	}
	t.Logf("%d RayService samples, every serveConfigV2 passes", checked)
}

// TestServeConfigLines: a finding inside serveConfigV2 points at its line
// in the file when the config is a literal block (|, |-, |2); otherwise,
// where lines of the string and of the file do not match one to one, at
// the key's line.
func TestServeConfigLines(t *testing.T) {
	head := "apiVersion: ray.io/v1\nkind: RayService\nmetadata:\n  name: serve\nspec:\n"
	cluster := "  rayClusterConfig:\n    headGroupSpec:\n      rayStartParams: {}\n      template:\n        spec:\n          containers: [{name: ray-head, image: rayproject/ray:2.52.0}]\n"
	config := "    applications:\n      - name: app\n        import_path: module.app\n        route_prefix: api\n"
	for _, c := range []struct {
		name, serve string
		line        int
	}{
		{"|", "  serveConfigV2: |\n" + config, 10},
		{"|-", "  serveConfigV2: |-\n" + config, 10},
		{"| on the next line", "  serveConfigV2:\n    |\n  " + strings.ReplaceAll(config, "\n    ", "\n      ")[2:], 11},
		{">", "  serveConfigV2: >\n" + config, 6},
		{"a quoted string", "  serveConfigV2: \"applications: [{name: app, import_path: module.app, route_prefix: api}]\"\n", 6},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []validation.Finding
			for _, f := range lintString(t, head+c.serve+cluster) {
				if f.ID == "serve-config" {
					got = append(got, f)
				}
			}
			if len(got) != 1 || got[0].Path != "spec.serveConfigV2.applications[0].route_prefix" || got[0].Line != c.line {
				t.Fatalf("want the route_prefix at line %d, got %v", c.line, got)
			}
		})
	}
}
