package gridweave_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"gridweave.dev/gridweave"
	"gridweave.dev/gridweave/fleet"
	"gridweave.dev/gridweave/tlspin"
	"gridweave.dev/internal/openapitest"
	"gridweave.dev/joinkeys"
	"gridweave.dev/joinkeys/memstore"
	"gridweave.dev/joinkeys/storetest"
	"gridweave.dev/mesh"
	"gridweave.dev/mesh/memmesh"
	"gridweave.dev/mesh/wgkey"
	"gridweave.dev/rayctl"
	"gridweave.dev/rayctl/rayctltest"
)

const (
	testAdminToken = "admin-token-for-tests-0123456789"
	testSecret     = "jwt-secret-for-tests-0123456789abcdef"
	testNamespace  = "gridweave"
)

// lockedBuffer collects log lines from concurrent handlers.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}
func (b *lockedBuffer) String() string { b.mu.Lock(); defer b.mu.Unlock(); return b.buf.String() }

// harness is the service over in-memory backends behind httptest.
type harness struct {
	t      testing.TB
	url    string
	server *gridweave.Server
	kr     *joinkeys.Keyring
	mesh   mesh.Mesh
	fakes  *rayctltest.Fakes
	clock  *storetest.Clock
	logs   *lockedBuffer
	cfg    gridweave.Config
	client *http.Client    // pins the certificate when the harness serves TLS
	tls    *tlspin.KeyPair // nil: plain HTTP
}

type harnessOptions struct {
	store  joinkeys.Store
	mesh   mesh.Mesh
	config func(*gridweave.Config)
	// hub is Backends.Hub, targets Backends.Targets.
	hub     func() string
	targets fleet.Targets
	// serve is Backends.Serve.
	serve *gridweave.ServeChannel
	// tls serves HTTPS with a key pair of the harness's own, as the
	// server does outside dev mode; the join command then pins it.
	tls bool
	// benchmark serves plain HTTP without checking answers against the
	// OpenAPI document, logs at the server's default level, to nowhere,
	// and keeps each client's connection open between its requests: what
	// the harness does on top of the server is left out of a benchmark's
	// figure.
	benchmark bool
}

func testConfig() gridweave.Config {
	cfg := gridweave.DefaultConfig()
	cfg.AdminToken, cfg.JWTSecret, cfg.ServerVersion = testAdminToken, testSecret, "1.4.0"
	cfg.MasterIP, cfg.VPNCIDR, cfg.MasterVPNIP = "203.0.113.7", netip.MustParsePrefix("198.18.0.0/16"), netip.MustParseAddr("198.18.0.1")
	cfg.Namespace, cfg.K3sURL = testNamespace, "https://198.18.0.1:6443"
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	return cfg
}

func newHarness(t testing.TB, o *harnessOptions) *harness {
	t.Helper()
	if o == nil {
		o = &harnessOptions{}
	}
	if o.benchmark && o.tls {
		t.Fatal("harnessOptions: benchmark serves plain HTTP; tls cannot be set with it")
	}
	cfg := testConfig()
	if o.config != nil {
		o.config(&cfg)
	}
	var kp *tlspin.KeyPair
	if o.tls {
		dir := t.TempDir()
		pair, err := tlspin.LoadOrCreate(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), []netip.Addr{netip.MustParseAddr("127.0.0.1")})
		if err != nil {
			t.Fatal(err)
		}
		kp, cfg.PublicPin = &pair, pair.Pin.String()
	}
	store := o.store
	if store == nil {
		store = new(memstore.Store)
	}
	t.Cleanup(func() { store.Close() })
	clock := storetest.NewClock()
	pool, err := joinkeys.NewPool(cfg.VPNCIDR, cfg.MasterVPNIP)
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	logger := slog.New(gridweave.LogHandler(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if o.benchmark {
		logger = slog.New(gridweave.LogHandler(slog.NewJSONHandler(io.Discard, nil)))
	}
	kr, err := joinkeys.New(store, &joinkeys.Options{JWTSecret: []byte(cfg.JWTSecret), Pool: pool, Now: clock.Now, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	m := o.mesh
	if m == nil {
		_, pub, _ := wgkey.GeneratePair()
		m = memmesh.New(pub)
	}
	fakes := rayctltest.New(t, cfg.Namespace)
	// Conflicts are retried on the real schedule's shape in milliseconds:
	// a write that keeps conflicting is refused without waiting the real
	// schedule's five seconds.
	quick := wait.Backoff{Steps: 10, Duration: time.Millisecond, Factor: 2, Cap: 10 * time.Millisecond}
	if fakes.Client, err = rayctl.New(fakes.Kube, fakes.Ray, &rayctl.Options{Namespace: cfg.Namespace, Backoff: &quick}); err != nil {
		t.Fatal(err)
	}
	s, err := gridweave.New(context.Background(), cfg, gridweave.Backends{
		Keyring: kr, Mesh: m, Ray: fakes.Client, Kube: fakes.Kube, Hub: o.hub, Targets: o.targets, Serve: o.serve, Logger: logger, Now: clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	var h *harness
	if o.benchmark {
		srv := httptest.NewServer(s.Handler())
		t.Cleanup(srv.Close)
		// Every client's connection stays open between its requests.
		transport := &http.Transport{MaxIdleConnsPerHost: 64}
		t.Cleanup(transport.CloseIdleConnections)
		h = &harness{t: t, url: srv.URL, server: s, cfg: cfg, client: &http.Client{Transport: transport}}
	} else {
		h = serveHarness(t, s, cfg, kp)
	}
	h.kr, h.mesh, h.fakes, h.clock, h.logs = kr, m, fakes, clock, logs
	return h
}

// quietServer is the service over the in-memory ledger and mesh with
// nothing logged and no rate limit: what a benchmark of the server's own
// work measures (the harness validates every answer and keeps its log).
func quietServer(b testing.TB) (*gridweave.Server, *joinkeys.Keyring) {
	cfg := testConfig()
	cfg.RateLimitPerMinute = 1 << 30
	pool, err := joinkeys.NewPool(cfg.VPNCIDR, cfg.MasterVPNIP)
	if err != nil {
		b.Fatal(err)
	}
	kr, err := joinkeys.New(new(memstore.Store), &joinkeys.Options{JWTSecret: []byte(cfg.JWTSecret), Pool: pool})
	if err != nil {
		b.Fatal(err)
	}
	_, pub, _ := wgkey.GeneratePair()
	fakes := rayctltest.New(b, cfg.Namespace)
	s, err := gridweave.New(context.Background(), cfg, gridweave.Backends{Keyring: kr, Mesh: memmesh.New(pub), Ray: fakes.Client, Kube: fakes.Kube})
	if err != nil {
		b.Fatal(err)
	}
	return s, kr
}

// newHarnessFor serves s over httptest. Every answer is checked against
// the service's OpenAPI document: one it does not describe (a status, a
// field, an error code) fails the test.
func newHarnessFor(t testing.TB, s *gridweave.Server, cfg gridweave.Config) *harness {
	return serveHarness(t, s, cfg, nil)
}

// harnessDocuments holds the OpenAPI document each server version serves,
// parsed (*openapitest.Document, safe to share): a server's routes depend
// on none of its settings, so the harness builds and parses the document
// once per version, not once per server (it was half the CPU of a short
// test here).
var harnessDocuments sync.Map

// serveHarness is newHarnessFor over HTTPS with kp when it is not nil.
func serveHarness(t testing.TB, s *gridweave.Server, cfg gridweave.Config, kp *tlspin.KeyPair) *harness {
	doc, ok := harnessDocuments.Load(cfg.ServerVersion)
	if !ok {
		raw, err := s.OpenAPI()
		if err != nil {
			t.Fatal(err)
		}
		doc, _ = harnessDocuments.LoadOrStore(cfg.ServerVersion, openapitest.MustParse(t, raw))
	}
	srv := httptest.NewUnstartedServer(openapitest.Middleware(t, doc.(*openapitest.Document), s.Handler()))
	client := http.DefaultClient
	if kp != nil {
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{kp.Certificate}}
		srv.StartTLS()
		client = &http.Client{Transport: &http.Transport{TLSClientConfig: tlspin.ClientConfig(kp.Pin)}}
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return &harness{t: t, url: srv.URL, server: s, cfg: cfg, clock: storetest.NewClock(), client: client, tls: kp}
}

// reply is a decoded answer.
type reply struct {
	status int
	header http.Header
	body   map[string]any
	raw    []byte
}

// errorField returns body.error.<name> as a string.
func (r reply) errorField(name string) string {
	e, _ := r.body["error"].(map[string]any)
	v, _ := e[name].(string)
	return v
}

// do sends body (a string is sent as it is, anything else as JSON) with
// the bearer token, if any.
func (h *harness) do(method, path, token string, body any) reply {
	h.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			h.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, h.url+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, header: resp.Header, raw: raw}
	_ = json.Unmarshal(raw, &r.body)
	return r
}

// want fails unless r has the status (and, for errors, the field).
func (h *harness) want(r reply, status int, what string) reply {
	h.t.Helper()
	if r.status != status {
		h.t.Fatalf("%s: status %d, want %d: %s", what, r.status, status, r.raw)
	}
	return r
}

func (h *harness) mint(kind string) (id, key string) {
	h.t.Helper()
	r := h.want(h.do("POST", "/v1/nodes/join-keys", testAdminToken, map[string]any{"kind": kind, "org": "acme", "ttl_seconds": 3600}), 201, "mint")
	return r.body["id"].(string), r.body["key"].(string)
}

// node is a machine joining in a test.
type node struct {
	hostname  string
	private   wgkey.PrivateKey
	public    string
	token     string
	vpnIP     string
	validated reply
}

func newNode(t testing.TB, hostname string) *node {
	priv, pub, err := wgkey.GeneratePair()
	if err != nil {
		t.Fatal(err)
	}
	return &node{hostname: hostname, private: priv, public: pub.String()}
}

func (h *harness) validate(n *node, key string) reply {
	h.t.Helper()
	r := h.do("POST", "/v1/nodes/validate", "", map[string]any{"key": key, "hostname": n.hostname, "public_key": n.public, "version": "1.4.2"})
	if r.status == 200 {
		n.token, n.vpnIP, n.validated = r.body["node_token"].(string), r.body["vpn_ip"].(string), r
	}
	return r
}

func h100s(n int) []map[string]any {
	gpus := make([]map[string]any, n)
	for i := range gpus {
		gpus[i] = map[string]any{"index": i, "vendor": "nvidia", "name": "NVIDIA H100 80GB HBM3", "memory_mib": 81559, "uuid": "GPU-" + string(rune('a'+i))}
	}
	return gpus
}

func (h *harness) register(n *node, gpus []map[string]any) reply {
	h.t.Helper()
	return h.do("POST", "/v1/nodes/register", "", map[string]any{"node_token": n.token, "hostname": n.hostname, "version": "1.4.2", "gpus": gpus})
}

// kubeNode adds the Kubernetes Node k3s would have registered for n, with
// the mark validate asks the agent to pass (fleet.MarkLabel).
func (h *harness) kubeNode(n *node, podCIDR string) {
	h.t.Helper()
	h.createKubeNode(n.hostname, podCIDR, markOf(h.t, n))
}

// markOf is the label k3s registers n's Node with (fleet.MarkLabel).
func markOf(t testing.TB, n *node) map[string]string {
	t.Helper()
	pub, err := wgkey.Parse(n.public)
	if err != nil {
		t.Fatal(err)
	}
	marks, err := gridweave.NodeMarker(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{fleet.MarkLabel: marks.Mark(pub)}
}

// foreignNode adds a Kubernetes Node no Gridweave join made (the
// master's, a machine joined to k3s otherwise).
func (h *harness) foreignNode(hostname, podCIDR string) {
	h.t.Helper()
	h.createKubeNode(hostname, podCIDR, nil)
}

func (h *harness) createKubeNode(hostname, podCIDR string, labels map[string]string) {
	h.t.Helper()
	all := map[string]string{corev1.LabelHostname: hostname}
	maps.Copy(all, labels)
	_, err := h.fakes.Kube.CoreV1().Nodes().Create(context.Background(), &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: hostname, Labels: all},
		Spec:       corev1.NodeSpec{PodCIDR: podCIDR},
	}, metav1.CreateOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
}

// jwtFor signs claims with the test secret (HS256 unless method says otherwise).
func jwtFor(t testing.TB, method jwt.SigningMethod, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(method, claims).SignedString([]byte(testSecret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func adminJWT(t testing.TB, now time.Time) string {
	return jwtFor(t, jwt.SigningMethodHS256, jwt.MapClaims{"sub": "alice", "role": "admin", "exp": now.Add(time.Hour).Unix(), "iat": now.Unix()})
}
