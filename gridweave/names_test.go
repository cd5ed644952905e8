package gridweave_test

import (
	"strings"
	"testing"

	"gridweave.dev/gridweave"
)

// TestNamesAreCheckedBeforeKubernetes: a name in a path or a query that
// cannot name a Kubernetes object (Go's router decodes %2F to a slash) is
// the caller's mistake, 400 naming the field (404 for a job's id, which
// no job can have), not a request the Kubernetes client refuses to send
// (500); the training's numbers are bounded before a job starts.
func TestNamesAreCheckedBeforeKubernetes(t *testing.T) {
	internal := strings.Repeat("i", 32) // the CRD proxy's routes are internal
	h := newHarness(t, &harnessOptions{config: func(c *gridweave.Config) { c.InternalToken = internal }})
	bundle := strings.Repeat("ab", 32)
	for _, c := range []struct {
		method, path string
		body         map[string]any
		status       int
		field        string
	}{
		{"GET", "/v1/crd/jobs/a%2Fb", nil, 400, "name"},
		{"GET", "/v1/crd/endpoints/%2E%2E", nil, 400, "name"},
		{"PATCH", "/v1/crd/jobs/a%25b", map[string]any{"spec": map[string]any{}}, 400, "name"},
		{"DELETE", "/v1/crd/jobs/A_B", nil, 400, "name"},
		{"GET", "/v1/kubetorch/health?cluster=a%2Fb", nil, 400, "cluster"},
		{"GET", "/v1/kubetorch/jobs/a%2Fb", nil, 404, ""},
		{"POST", "/v1/kubetorch/train", map[string]any{"cluster": "a/b", "bundle": bundle, "command": "python t.py"}, 400, "cluster"},
		{"POST", "/v1/kubetorch/train", map[string]any{"cluster": "c", "bundle": bundle, "command": "python t.py", "nodes": 4294967297}, 400, "nodes"},
		{"POST", "/v1/kubetorch/train", map[string]any{"cluster": "c", "bundle": bundle, "command": "python t.py", "gpus_per_node": 1 << 20}, 400, "gpus_per_node"},
		{"POST", "/v1/kubetorch/train", map[string]any{"cluster": "c", "bundle": bundle, "command": "python t.py", "owner": strings.Repeat("o", 254)}, 400, "owner"},
	} {
		token := testAdminToken
		if strings.HasPrefix(c.path, "/v1/crd/") {
			token = internal
		}
		r := h.do(c.method, c.path, token, c.body)
		if r.status != c.status || r.errorField("field") != c.field {
			t.Errorf("%s %s: %d %s; want %d naming %q", c.method, c.path, r.status, r.raw, c.status, c.field)
		}
	}
}
