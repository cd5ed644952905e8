package gridweave_test

import (
	"strings"
	"testing"

	"gridweave.dev/gridweave"
)

// FuzzJSONHandlers sends any bytes to every route that reads a JSON body,
// with the admin token: whatever arrives, the answer is never a 5xx and
// the server never panics.
//
//	go test -run '^$' -fuzz FuzzJSONHandlers -fuzztime 60s ./gridweave/
func FuzzJSONHandlers(f *testing.F) {
	routes := []struct{ method, path string }{
		{"POST", "/v1/nodes/join-keys"},
		{"POST", "/v1/nodes/validate"},
		{"POST", "/v1/nodes/register"},
		{"POST", "/v1/nodes/disconnect"},
		{"POST", "/v1/nodes/leave"},
		{"POST", "/v1/nodes/verify-provider"},
		{"POST", "/v1/nodes/report-version"},
		{"POST", "/v1/kuberay/clusters"},
		{"PATCH", "/v1/kuberay/clusters/c/scale"},
		{"POST", "/v1/kuberay/clusters/c/worker-groups"},
		{"POST", "/v1/kuberay/clusters/c/worker-groups-raw"},
		{"POST", "/v1/kuberay/clusters/c/swap-worker-groups"},
		{"POST", "/v1/kuberay/clusters/c/replace-worker-groups"},
	}
	for i := range routes {
		for _, seed := range []string{
			`{"kind":"org","org":"acme","ttl_seconds":60}`,
			`{"key":"gwk_000000000000_` + strings.Repeat("0", 64) + `","hostname":"h","public_key":"HIgo9xNzJMWLKASShiTqIybxZ0U3wGLiUeJ1PKf8ykw=","version":"1.4.0"}`,
			`{"node_token":"x","hostname":"h","version":"1.4.0","gpus":[{"index":0,"vendor":"nvidia","name":"H100","memory_mib":1,"uuid":"u"}]}`,
			`{"hostname":"h"}`, `{"name":"c","head":{"cpu":"1"}}`, `{"apiVersion":"ray.io/v1","kind":"RayCluster","metadata":{"name":"c"}}`,
			`{"group":"g","replicas":-1}`, `{"old_group":"a","new_group":{"groupName":"b"}}`, `{"worker_groups":[{}]}`, `{}`, `[]`, `null`, `"x"`,
		} {
			f.Add(uint8(i), []byte(seed))
		}
	}
	h := newHarness(f, &harnessOptions{config: func(c *gridweave.Config) { c.RateLimitPerMinute = 1 << 30 }})
	if r := h.do("POST", "/v1/kuberay/clusters", testAdminToken, `{"name":"c","head":{"cpu":"1","memory":"1Gi"}}`); r.status != 201 {
		f.Fatalf("create the fuzzed cluster: %d %s", r.status, r.raw)
	}
	// Real credentials in the seed corpus, so that mutations get past the
	// credential checks into the handlers' own work.
	_, key := h.mint("org")
	_, provider := h.mint("provider")
	n := newNode(f, "fuzz-node")
	h.want(h.validate(n, key), 200, "validate the fuzzed node")
	for i := range routes {
		for _, seed := range []string{
			`{"key":"` + key + `","hostname":"fuzz-new","public_key":"` + newNode(f, "x").public + `","version":"1.4.0"}`,
			`{"node_token":"` + n.token + `","hostname":"fuzz-node","public_key":"` + n.public + `","version":"1.4.1"}`,
			`{"node_token":"` + n.token + `","hostname":"fuzz-node","version":"1.4.0","gpus":[{"index":0,"vendor":"nvidia","name":"H100","memory_mib":80,"uuid":"GPU-1"}]}`,
			`{"hostname":"fuzz-node","version":"1.4.2"}`,
		} {
			f.Add(uint8(i), []byte(seed))
		}
	}
	bearerFor := map[string]string{"/v1/nodes/leave": n.token, "/v1/nodes/report-version": n.token, "/v1/nodes/verify-provider": provider}
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		rt := routes[int(route)%len(routes)]
		h.t = t
		token := testAdminToken
		if b, ok := bearerFor[rt.path]; ok {
			token = b
		}
		r := h.do(rt.method, rt.path, token, body)
		if r.status >= 500 {
			t.Fatalf("%s %s %q: %d %s", rt.method, rt.path, body, r.status, r.raw)
		}
	})
}
