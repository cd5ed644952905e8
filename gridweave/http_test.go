package gridweave_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"gridweave.dev/gridweave/api"
	"gridweave.dev/joinkeys"

	"github.com/golang-jwt/jwt/v5"

	"gridweave.dev/gridweave"
)

// TestMalformedInputIs400NamingTheField: broken JSON, unknown, mistyped,
// wrongly cased or trailing fields, bad values; nothing is written.
func TestMalformedInputIs400NamingTheField(t *testing.T) {
	stores(t, func(t *testing.T, store func(testing.TB) joinkeys.Store) {
		h := newHarness(t, &harnessOptions{store: store(t)})
		_, key := h.mint("org")
		pub := newNode(t, "x").public
		valid := func(extra string) string {
			return `{"key":"` + key + `","hostname":"box","public_key":"` + pub + `","version":"1.4.0"` + extra + `}`
		}
		cases := []struct {
			name, path, body, field string
		}{
			{"unknown field", "/v1/nodes/validate", valid(`,"colour":"red"`), "colour"},
			{"wrong case", "/v1/nodes/validate", `{"key":"` + key + `","Hostname":"box","public_key":"` + pub + `","version":"1.4.0"}`, "Hostname"},
			{"mistyped", "/v1/nodes/validate", `{"key":"` + key + `","hostname":7,"public_key":"` + pub + `","version":"1.4.0"}`, "hostname"},
			{"duplicate", "/v1/nodes/validate", valid(`,"hostname":"other"`), "hostname"},
			{"bad hostname", "/v1/nodes/validate", strings.Replace(valid(""), `"box"`, `"Box_1"`, 1), "hostname"},
			{"reserved hostname", "/v1/nodes/validate", strings.Replace(valid(""), `"box"`, `"join-keys"`, 1), "hostname"},
			{"bad public key", "/v1/nodes/validate", strings.Replace(valid(""), pub, "AAAA", 1), "public_key"},
			{"bad version", "/v1/nodes/validate", strings.Replace(valid(""), `"1.4.0"`, `"one"`, 1), "version"},
			{"no version", "/v1/nodes/validate", strings.Replace(valid(""), `,"version":"1.4.0"`, ``, 1), "version"},
			{"bad gpu vendor", "/v1/nodes/register", `{"key":"` + key + `","hostname":"box","public_key":"` + pub + `","version":"1.4.0","gpus":[{"index":0,"vendor":"intel","name":"x","memory_mib":1,"uuid":"u"}]}`, "gpus[0].vendor"},
			{"gpu mistyped", "/v1/nodes/register", `{"key":"` + key + `","hostname":"box","public_key":"` + pub + `","version":"1.4.0","gpus":[{"index":"zero"}]}`, "gpus.index"},
		}
		for _, c := range cases {
			r := h.do("POST", c.path, "", c.body)
			if r.status != 400 || !strings.Contains(r.errorField("field"), c.field) {
				t.Errorf("%s: %d %s; want 400 naming %s", c.name, r.status, r.raw, c.field)
			}
		}
		for _, body := range []string{`{`, `{"key":1}{}`, `[]`, ``, `{"hostname":"a"} trailing`, `null`} {
			if r := h.do("POST", "/v1/nodes/validate", "", body); r.status != 400 || r.errorField("code") == "" {
				t.Errorf("body %q: %d %s; want 400 in the error shape", body, r.status, r.raw)
			}
		}
		mints := []struct{ body, field string }{
			{`{"kind":"org","org":"acme","ttl_seconds":-5}`, "ttl_seconds"},
			{`{"kind":"org","org":"acme"}`, "ttl_seconds"},
			{`{"kind":"team","org":"acme","ttl_seconds":5}`, "kind"},
			{`{"kind":"org","ttl_seconds":5}`, "org"},
			{`{"kind":"org","org":"acme","ttl_seconds":"5"}`, "ttl_seconds"},
			{`{"kind":"org","org":"acme","ttl_seconds":5,"max_uses":-1}`, "max_uses"},
		}
		for _, c := range mints {
			if r := h.do("POST", "/v1/nodes/join-keys", testAdminToken, c.body); r.status != 400 || r.errorField("field") != c.field {
				t.Errorf("mint %s: %d %s; want 400 naming %s", c.body, r.status, r.raw, c.field)
			}
		}
		if nodes, _ := h.kr.Nodes(context.Background()); len(nodes) != 0 {
			t.Errorf("malformed requests wrote %d nodes", len(nodes))
		}
		if r := h.do("POST", "/v1/nodes/validate", "", `{"hostname":"box","public_key":"`+pub+`","version":"1.4.0"}`); r.status != 401 || r.header.Get("WWW-Authenticate") == "" {
			t.Errorf("validate without any credential: %d %s; want 401", r.status, r.raw)
		}
		if r := h.do("POST", "/v1/nodes/validate", "", ""); r.status != 400 {
			t.Errorf("empty body: %d", r.status)
		}
	})
}

func TestCredentials(t *testing.T) {
	stores(t, func(t *testing.T, store func(testing.TB) joinkeys.Store) {
		h := newHarness(t, &harnessOptions{store: store(t)})
		_, key := h.mint("org")
		_, provider := h.mint("provider")
		now := h.clock.Now()
		claims := func(kv ...any) jwt.MapClaims {
			c := jwt.MapClaims{"sub": "alice", "role": "admin", "exp": now.Add(time.Hour).Unix()}
			for i := 0; i < len(kv); i += 2 {
				if kv[i+1] == nil {
					delete(c, kv[i].(string))
				} else {
					c[kv[i].(string)] = kv[i+1]
				}
			}
			return c
		}
		noneToken := strings.Join([]string{`eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0`, strings.Split(jwtFor(t, jwt.SigningMethodHS256, claims()), ".")[1], ""}, ".")
		cases := []struct {
			name, token string
			status      int
		}{
			{"no credential", "", 401},
			{"garbage", "hello", 401},
			{"admin token", testAdminToken, 200},
			{"admin token with a byte changed", testAdminToken[:len(testAdminToken)-1] + "x", 401},
			{"admin JWT", adminJWT(t, now), 200},
			{"admin JWT 30s in the future (clock skew)", jwtFor(t, jwt.SigningMethodHS256, claims("iat", now.Add(30*time.Second).Unix())), 200},
			{"user JWT", jwtFor(t, jwt.SigningMethodHS256, claims("role", "user")), 403},
			{"provider key", provider, 403},
			{"join key", key, 401},
			{"alg none", noneToken, 401},
			{"HS512", jwtFor(t, jwt.SigningMethodHS512, claims()), 401},
			{"expired", jwtFor(t, jwt.SigningMethodHS256, claims("exp", now.Add(-time.Second).Unix())), 401},
			{"expiring now", jwtFor(t, jwt.SigningMethodHS256, claims("exp", now.Unix())), 401},
			{"no exp", jwtFor(t, jwt.SigningMethodHS256, claims("exp", nil)), 401},
			{"no sub", jwtFor(t, jwt.SigningMethodHS256, claims("sub", nil)), 401},
			{"unknown role", jwtFor(t, jwt.SigningMethodHS256, claims("role", "root")), 401},
			{"not valid yet", jwtFor(t, jwt.SigningMethodHS256, claims("nbf", now.Add(time.Hour).Unix())), 401},
		}
		for _, c := range cases {
			r := h.do("GET", "/v1/nodes", c.token, nil)
			if r.status != c.status {
				t.Errorf("%s: %d %s; want %d", c.name, r.status, r.raw, c.status)
			}
			if r.status == 401 && r.header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s: 401 without WWW-Authenticate", c.name)
			}
		}
		// verify-provider takes the provider key, and only it.
		v := h.want(h.do("POST", "/v1/nodes/verify-provider", provider, "{}"), 200, "verify-provider")
		for _, f := range []string{"org", "provider", "key_id", "expires_at"} {
			if _, ok := v.body[f]; !ok {
				t.Errorf("verify-provider lacks %q: %s", f, v.raw)
			}
		}
		h.want(h.do("POST", "/v1/nodes/verify-provider", testAdminToken, "{}"), 403, "verify-provider with the admin token")
		h.want(h.do("POST", "/v1/nodes/verify-provider", "", "{}"), 401, "verify-provider without a credential")
		// Credentials in a body are 401 too, never 400.
		n := newNode(t, "n1")
		for _, bad := range []string{"gwk_000000000000_" + strings.Repeat("0", 64), "not-a-key", provider[:len(provider)-3] + "abc"} {
			h.want(h.validate(n, bad), 401, "validate with key "+bad[:8])
		}
		h.want(h.do("POST", "/v1/nodes/validate", "", map[string]any{"node_token": "gwn_" + strings.Repeat("0", 64), "hostname": "n1", "public_key": n.public, "version": "1.4.0"}), 401, "validate with an unknown node token")
	})
}

func TestBodyLimit(t *testing.T) {
	h := newHarness(t, nil)
	big := `{"kind":"org","org":"` + strings.Repeat("a", 2<<20) + `","ttl_seconds":5}`
	r := h.do("POST", "/v1/nodes/join-keys", testAdminToken, big)
	if r.status != 413 || r.errorField("code") != "body_too_large" {
		t.Errorf("2 MiB body: %d %s", r.status, r.raw[:min(len(r.raw), 200)])
	}
	// A declared Content-Length over the limit is refused before the body
	// is sent: a client waiting on 100-continue gets the 413 at once.
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/nodes/join-keys HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n", testAdminToken, 5<<20)
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer before the body was sent: %v", err)
	}
	if resp.StatusCode != 413 {
		t.Errorf("Expect: 100-continue with 5 MiB declared: %d, want 413", resp.StatusCode)
	}
}

func TestRateLimit(t *testing.T) {
	h := newHarness(t, &harnessOptions{config: func(c *gridweave.Config) { c.RateLimitPerMinute = 5 }})
	for i := range 5 {
		h.want(h.do("GET", "/v1/nodes", testAdminToken, nil), 200, fmt.Sprintf("request %d", i+1))
	}
	r := h.want(h.do("GET", "/v1/nodes", testAdminToken, nil), 429, "sixth request in a minute")
	if r.header.Get("Retry-After") != "12" {
		t.Errorf("Retry-After %q, want 12 (5 a minute refill one every 12 s)", r.header.Get("Retry-After"))
	}
	h.want(h.do("GET", "/healthz", "", nil), 200, "healthz is exempt")
	h.clock.Advance(12 * time.Second)
	h.want(h.do("GET", "/v1/nodes", testAdminToken, nil), 200, "after the refill")
}

func TestCORS(t *testing.T) {
	h := newHarness(t, &harnessOptions{config: func(c *gridweave.Config) { c.CORSOrigins = []string{"https://console.example"} }})
	preflight := func(origin string) *http.Response {
		req, _ := http.NewRequest("OPTIONS", h.url+"/v1/nodes", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "GET")
		req.Header.Set("Access-Control-Request-Headers", "authorization")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	ok := preflight("https://console.example")
	if ok.StatusCode != 204 || ok.Header.Get("Access-Control-Allow-Origin") != "https://console.example" || !strings.Contains(ok.Header.Get("Access-Control-Allow-Headers"), "Authorization") {
		t.Errorf("listed origin preflight: %d %v", ok.StatusCode, ok.Header)
	}
	if no := preflight("https://evil.example"); no.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("an unlisted origin was granted: %v", no.Header)
	}
}

func TestNotFoundAndMethodNotAllowed(t *testing.T) {
	h := newHarness(t, nil)
	if r := h.do("GET", "/v1/nope", testAdminToken, nil); r.status != 404 || r.errorField("code") == "" {
		t.Errorf("unknown route: %d %s", r.status, r.raw)
	}
	r := h.do("GET", "/v1/nodes/join-keys/abc", testAdminToken, nil)
	if r.status != 405 || r.header.Get("Allow") != "DELETE" {
		t.Errorf("GET on a POST route: %d, Allow %q", r.status, r.header.Get("Allow"))
	}
}

// TestLogsHoldNoSecretsAndCarryRequestIDs runs the flow with debug logs
// and greps them for every secret.
func TestLogsHoldNoSecretsAndCarryRequestIDs(t *testing.T) {
	stores(t, func(t *testing.T, store func(testing.TB) joinkeys.Store) {
		h := newHarness(t, &harnessOptions{store: store(t)})
		_, key := h.mint("org")
		_, provider := h.mint("provider")
		n := newNode(t, "n1")
		h.want(h.validate(n, key), 200, "validate")
		h.want(h.register(n, h100s(1)), 200, "register")
		h.do("POST", "/v1/nodes/verify-provider", provider, "{}")
		h.do("POST", "/v1/nodes/report-version", n.token, map[string]any{"hostname": "n1", "version": "1.4.1"})
		h.do("POST", "/v1/nodes/validate", "", map[string]any{"key": key + "x", "hostname": "n2", "public_key": n.public, "version": "1.4.0"})
		admin := adminJWT(t, h.clock.Now())
		h.do("GET", "/v1/nodes", admin, nil)

		req, _ := http.NewRequest("GET", h.url+"/v1/nodes", nil)
		req.Header.Set("Authorization", "Bearer "+testAdminToken)
		req.Header.Set("X-Request-Id", "trace-42")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.Header.Get("X-Request-Id") != "trace-42" {
			t.Errorf("request id not echoed: %q", resp.Header.Get("X-Request-Id"))
		}
		logs := h.logs.String()
		if !strings.Contains(logs, `"request_id":"trace-42"`) {
			t.Errorf("the log does not carry the request id:\n%s", logs)
		}
		// Every line logged during a request carries its id, the Keyring's too.
		for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
			if !strings.Contains(line, `"request_id":`) {
				t.Errorf("a log line without a request id: %s", line)
			}
		}
		if !strings.Contains(logs, `"msg":"join accepted"`) {
			t.Error("the Keyring's lines are missing from the service's log")
		}
		for name, secret := range map[string]string{"org key": key, "provider key": provider, "node token": n.token, "admin token": testAdminToken, "admin JWT": admin, "JWT secret": testSecret} {
			if strings.Contains(logs, secret) {
				t.Errorf("the log holds the %s", name)
			}
		}
	})
}

func TestMetricsNeedTheAdminCredential(t *testing.T) {
	h := newHarness(t, nil)
	h.want(h.do("GET", "/metrics", "", nil), 401, "metrics without a credential")
	_, key := h.mint("org")
	h.want(h.validate(newNode(t, "n1"), key), 200, "validate")
	r := h.want(h.do("GET", "/metrics", testAdminToken, nil), 200, "metrics")
	for _, want := range []string{`gridweave_http_requests_total{code="201",method="POST",route="POST /v1/nodes/join-keys"} 1`,
		`gridweave_joins_total{outcome="ok",step="validate"} 1`, `gridweave_nodes{status="validated"} 1`, `gridweave_mesh_peers 1`,
		`gridweave_http_request_duration_seconds_bucket`} {
		if !strings.Contains(string(r.raw), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// TestWireContractFixes: a JSON route without its content type is 415;
// a credential is judged before the body's other fields; a GPU's vendor
// may be left out and is then NVIDIA's.
func TestWireContractFixes(t *testing.T) {
	h := newHarness(t, nil)
	_, key := h.mint("org")
	for _, ct := range []string{"", "text/plain", "application/x-www-form-urlencoded", "application/jsonx"} {
		req, _ := http.NewRequest("POST", h.url+"/v1/nodes/join-keys", strings.NewReader(`{"kind":"org","org":"acme","ttl_seconds":60}`))
		req.Header.Set("Authorization", "Bearer "+testAdminToken)
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body api.ErrorBody
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnsupportedMediaType || body.Error.Code != "unsupported_media_type" {
			t.Errorf("Content-Type %q: %d %+v; want 415 unsupported_media_type", ct, resp.StatusCode, body.Error)
		}
	}
	if r := h.do("POST", "/v1/nodes/join-keys", testAdminToken, map[string]any{"kind": "org", "org": "acme", "ttl_seconds": 60}); r.status != 201 {
		t.Errorf("application/json: %d %s", r.status, r.raw)
	}

	n := newNode(t, "cred-first")
	h.want(h.validate(n, key), 200, "validate")
	badGPUs := []map[string]any{{"index": "zero", "vendor": "intel"}}
	r := h.do("POST", "/v1/nodes/register", "", map[string]any{"node_token": "gwn_forged", "hostname": n.hostname, "version": "1.4.2", "gpus": []map[string]any{{"index": 0, "vendor": "intel", "name": ""}}})
	if r.status != 401 {
		t.Errorf("a forged node token with a malformed GPU list: %d %s; want 401", r.status, r.raw)
	}
	r = h.do("POST", "/v1/nodes/validate", "", map[string]any{"key": "gwk_000000000000_" + strings.Repeat("0", 64), "hostname": "Bad_Host", "public_key": "AAAA", "version": "x"})
	if r.status != 401 {
		t.Errorf("a forged join key with malformed fields: %d %s; want 401", r.status, r.raw)
	}
	r = h.do("POST", "/v1/nodes/register", "", map[string]any{"node_token": "gwn_forged", "hostname": n.hostname, "version": "1.4.2", "gpus": badGPUs})
	if r.status != 401 || r.errorField("code") != "invalid_node_token" {
		t.Errorf("a forged node token with a mistyped GPU list: %d %s; want 401 invalid_node_token", r.status, r.raw)
	}
	r = h.do("POST", "/v1/nodes/validate", "", map[string]any{"hostname": 7, "public_key": false})
	if r.status != 401 || r.errorField("code") != "unauthenticated" {
		t.Errorf("no credential and mistyped fields: %d %s; want 401 unauthenticated", r.status, r.raw)
	}
	if r := h.do("POST", "/v1/nodes/register", "", map[string]any{"node_token": n.token, "hostname": n.hostname, "version": "1.4.2", "gpus": badGPUs}); r.status != 400 || r.errorField("field") != "gpus.index" {
		t.Errorf("a valid node token with a mistyped GPU list: %d %s; want 400 naming gpus.index", r.status, r.raw)
	}

	gpus := []map[string]any{{"index": 0, "name": "NVIDIA A100-SXM4-80GB", "memory_mib": 81920, "uuid": "GPU-0"}}
	reg := h.want(h.register(n, gpus), 200, "register without a vendor")
	got := reg.body["node"].(map[string]any)["gpus"].([]any)[0].(map[string]any)["vendor"]
	if got != "nvidia" || reg.body["worker_group"] != "gpu-nvidia-nvidia-a100-sxm4-80gb-x1" {
		t.Errorf("a GPU without a vendor registered as %v in group %v; want nvidia", got, reg.body["worker_group"])
	}
	if r := h.do("POST", "/v1/nodes/register", "", map[string]any{"node_token": n.token, "hostname": n.hostname, "version": "1.4.2", "gpus": []map[string]any{{"index": 0, "vendor": "nvidia", "name": ""}}}); r.status != 400 || r.errorField("field") != "gpus[0].name" {
		t.Errorf("a GPU without a name: %d %s; want 400 naming gpus[0].name", r.status, r.raw)
	}
}

// TestMetricsLabelsAreBounded: methods outside the standard ones count as
// OTHER, so no caller creates series at will.
func TestMetricsLabelsAreBounded(t *testing.T) {
	h := newHarness(t, nil)
	for i := range 5 {
		req, _ := http.NewRequest(fmt.Sprintf("FOO%d", i), h.url+"/v1/nodes", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	r := h.want(h.do("GET", "/metrics", testAdminToken, nil), 200, "metrics")
	if strings.Contains(string(r.raw), `method="FOO`) {
		t.Error("a caller's own method became a metric label")
	}
	if !strings.Contains(string(r.raw), `method="OTHER"`) {
		t.Error("the odd methods were not counted as OTHER")
	}
}

// TestRateLimitKeysIPv6ByPrefix: an IPv6 host holds a whole /64, so its
// addresses share one bucket; another /64, and IPv4 addresses, have their
// own.
func TestRateLimitKeysIPv6ByPrefix(t *testing.T) {
	h := newHarness(t, &harnessOptions{config: func(c *gridweave.Config) { c.RateLimitPerMinute = 3 }})
	from := func(remote string) int {
		req := httptest.NewRequest("GET", "/v1/nodes", nil)
		req.RemoteAddr = remote
		req.Header.Set("Authorization", "Bearer "+testAdminToken)
		rec := httptest.NewRecorder()
		h.server.Handler().ServeHTTP(rec, req)
		return rec.Code
	}
	for i := range 3 {
		if code := from(fmt.Sprintf("[2001:db8:1:2::%x]:4000", i+1)); code != 200 {
			t.Fatalf("request %d from the /64: %d", i+1, code)
		}
	}
	if code := from("[2001:db8:1:2:ffff::9]:4000"); code != 429 {
		t.Errorf("a fourth address of the same /64: %d, want 429", code)
	}
	if code := from("[2001:db8:1:3::1]:4000"); code != 200 {
		t.Errorf("another /64: %d, want 200", code)
	}
	if code := from("192.0.2.7:4000"); code != 200 {
		t.Errorf("an IPv4 client: %d, want 200", code)
	}
}
