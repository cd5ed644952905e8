package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"gridweave.dev/gridweave/tlspin"
	"gridweave.dev/mesh/wgkey"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// testClients are the pinned clients of the servers that serve HTTPS,
// by address.
var testClients sync.Map

// clientFor returns the client that reaches url: pinned to its server's
// key when it serves HTTPS.
func clientFor(url string) *http.Client {
	for _, scheme := range []string{"https://", "http://"} {
		if rest, ok := strings.CutPrefix(url, scheme); ok {
			host, _, _ := strings.Cut(rest, "/")
			if c, ok := testClients.Load(host); ok {
				return c.(*http.Client)
			}
		}
	}
	return http.DefaultClient
}

// started is a run of the server in this process.
type started struct {
	url            string
	pin            tlspin.Pin // zero for plain HTTP
	stdout, stderr *syncBuffer
	stop           context.CancelFunc
	done           chan error
}

func start(t *testing.T, env map[string]string, args ...string) *started {
	t.Helper()
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	s := &started{url: "http://" + addr, stdout: &syncBuffer{}, stderr: &syncBuffer{}, stop: cancel, done: make(chan error, 1)}
	go func() {
		s.done <- run(ctx, append([]string{"--addr", addr}, args...), func(k string) string { return env[k] }, s.stdout, s.stderr)
	}()
	t.Cleanup(func() { cancel(); <-s.done })
	deadline := time.Now().Add(20 * time.Second)
	dir := filepath.Dir(env["KUBERAY_DB"])
	for {
		// Outside dev mode the server serves HTTPS with the pair it keeps
		// beside the ledger: the test pins it, as a joining machine does.
		if kp, err := tlspin.Load(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")); err == nil {
			s.url, s.pin = "https://"+addr, kp.Pin
			testClients.Store(addr, &http.Client{Transport: &http.Transport{TLSClientConfig: tlspin.ClientConfig(kp.Pin)}})
		}
		resp, err := clientFor(s.url).Get(s.url + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return s
			}
		}
		select {
		case err := <-s.done:
			t.Fatalf("server stopped: %v\n%s", err, s.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("server did not answer /healthz: %s", s.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func post(t *testing.T, url, token string, body any) (int, map[string]any) {
	t.Helper()
	data, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", url, bytes.NewReader(data))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := clientFor(url).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return resp.StatusCode, out
}

// TestDevModeServesTheJoinFlow starts the binary's wiring on embedded
// defaults (SQLite in a temp dir, in-memory mesh and cluster), joins a
// node with the admin token it printed, restarts, and stops on cancel.
func TestDevModeServesTheJoinFlow(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"KUBERAY_DB": filepath.Join(dir, "data", "kuberay.db"), "KUBECONFIG": "", "WG_INTERFACE": "none"}
	s := start(t, env, "--dev")
	token := regexp.MustCompile(`admin token of this run is ([0-9a-f]+)`).FindStringSubmatch(s.stdout.String())
	if token == nil {
		t.Fatalf("dev mode printed no admin token: %q", s.stdout.String())
	}
	for _, says := range []string{"DEV MODE", "MESH IN MEMORY", "EMBEDDED IN-MEMORY CLUSTER", "k3s step off"} {
		if !strings.Contains(s.stderr.String(), says) {
			t.Errorf("the start-up log does not say %q", says)
		}
	}
	status, minted := post(t, s.url+"/v1/nodes/join-keys", token[1], map[string]any{"kind": "org", "org": "acme", "ttl_seconds": 600})
	if status != 201 {
		t.Fatalf("mint: %d %v", status, minted)
	}
	_, pub, _ := wgkey.GeneratePair()
	status, v := post(t, s.url+"/v1/nodes/validate", "", map[string]any{"key": minted["key"], "hostname": "gpu-1", "public_key": pub.String(), "version": "0.0.1"})
	if status != 200 {
		t.Fatalf("validate: %d %v", status, v)
	}
	status, reg := post(t, s.url+"/v1/nodes/register", "", map[string]any{"node_token": v["node_token"], "hostname": "gpu-1", "version": "0.0.1",
		"gpus": []map[string]any{{"index": 0, "vendor": "nvidia", "name": "NVIDIA H100 80GB HBM3", "memory_mib": 81559, "uuid": "GPU-1"}}})
	if status != 200 || reg["worker_group"] == nil {
		t.Fatalf("register: %d %v", status, reg)
	}
	keyFile := filepath.Join(dir, "data", "wireguard.key")
	if fi, err := os.Stat(keyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("master key file: %v %v", fi, err)
	}
	s.stop()
	select {
	case err := <-s.done:
		if err != nil {
			t.Fatalf("stop: %v", err)
		}
		s.done <- nil
	case <-time.After(15 * time.Second):
		t.Fatal("the server did not stop within 15 s of its signal")
	}

	// A restart keeps the ledger and the master's key.
	s = start(t, env, "--dev")
	status, again := post(t, s.url+"/v1/nodes/validate", "", map[string]any{"node_token": v["node_token"], "hostname": "gpu-1", "public_key": pub.String(), "version": "0.0.1"})
	if status != 200 || again["vpn_ip"] != v["vpn_ip"] || again["master_public_key"] != v["master_public_key"] {
		t.Fatalf("after a restart: %d %v, before %v", status, again, v)
	}
}

func TestRefusesUnsafeDefaults(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		env  map[string]string
		says string
	}{
		{map[string]string{}, "JWT_SECRET"},
		{map[string]string{"JWT_SECRET": strings.Repeat("s", 40)}, "ADMIN_TOKEN"},
		{map[string]string{"JWT_SECRET": "short-secret"}, "JWT_SECRET"},
		{map[string]string{"KUBERAY_PORT": "eighty"}, "KUBERAY_PORT"},
	} {
		c.env["KUBERAY_DB"] = filepath.Join(dir, "x.db")
		err := run(context.Background(), nil, func(k string) string { return c.env[k] }, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("env %v: %v, want a refusal naming %s", c.env, err, c.says)
		}
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"--version"}, func(k string) string { return map[string]string{"SERVER_VERSION": "1.2.3"}[k] }, &out, io.Discard); err != nil || out.String() != "1.2.3\n" {
		t.Errorf("--version: %q, %v", out.String(), err)
	}
	_ = fmt.Sprint()
}

// TestDevModeListensOnLoopback: dev mode's secrets are derivable, so
// without --addr it listens on loopback only.
func TestDevModeListensOnLoopback(t *testing.T) {
	_, port, _ := net.SplitHostPort(freeAddr(t))
	env := map[string]string{"KUBERAY_DB": t.TempDir() + "/kuberay.db", "WG_INTERFACE": "none", "KUBERAY_PORT": port}
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"--dev"}, func(k string) string { return env[k] }, stdout, stderr) }()
	t.Cleanup(func() { cancel(); <-done })
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(stderr.String(), `"msg":"listening"`) {
		if time.Now().After(deadline) {
			t.Fatalf("the server did not listen: %s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if want := `"addr":"127.0.0.1:` + port + `"`; !strings.Contains(stderr.String(), want) {
		t.Errorf("dev mode listens elsewhere than loopback: want %s in\n%s", want, stderr.String())
	}
	resp, err := http.Get("http://127.0.0.1:" + port + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}
