package gridweave_test

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"gridweave.dev/gridweave"
	"gridweave.dev/gridweave/node/joinscript"
	"gridweave.dev/gridweave/tlspin"
)

// fakeAgent is a stand-in agent: it prints its command line as the
// kernel keeps it (/proc/<pid>/cmdline, readable by every user) and the
// key it was handed in its environment.
const fakeAgent = "#!/bin/sh\necho \"agent cmdline: $(tr '\\0' ' ' < /proc/$$/cmdline)\"\necho \"agent key: ${GRIDWEAVE_JOIN_KEY:-none}\"\n"

// runJoinScript runs the served join-node.sh with bash, as the join
// command does, against masterURL, with the environment the join
// command sets (MASTER_IP, MASTER_PIN) in env.
func runJoinScript(t *testing.T, script []byte, masterURL string, env []string, args ...string) (out, stateDir string, err error) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "join-node.sh")
	if err := os.WriteFile(path, script, 0o644); err != nil {
		t.Fatal(err)
	}
	stateDir = filepath.Join(dir, "state")
	cmd := exec.Command("bash", append([]string{path}, args...)...)
	cmd.Env = append(os.Environ(), "MASTER_IP=198.18.0.1", "MASTER_URL="+masterURL, "GRIDWEAVE_STATE_DIR="+stateDir, "GRIDWEAVE_ALLOW_NON_ROOT=1")
	cmd.Env = append(cmd.Env, env...)
	raw, err := cmd.CombinedOutput()
	return string(raw), stateDir, err
}

// agentHarness is a harness whose AGENT_DIR holds fakeAgent for this
// machine.
func agentHarness(t *testing.T, tls bool) *harness {
	t.Helper()
	if runtime.GOOS != "linux" || (runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64") {
		t.Skip("join-node.sh serves linux/amd64 and linux/arm64 nodes")
	}
	agents := t.TempDir()
	if err := os.WriteFile(filepath.Join(agents, "join-node-linux-"+runtime.GOARCH), []byte(fakeAgent), 0o755); err != nil {
		t.Fatal(err)
	}
	return newHarness(t, &harnessOptions{tls: tls, config: func(c *gridweave.Config) { c.AgentDir = agents }})
}

func TestJoinScriptFetchesChecksAndRunsTheAgent(t *testing.T) {
	h := agentHarness(t, false)
	r := h.want(h.do("GET", "/join-node.sh", "", nil), 200, "join-node.sh")
	if !strings.Contains(string(r.raw), "http://${master_host}:8800") {
		t.Errorf("the script does not default to the server's port:\n%s", r.raw)
	}
	out, _, err := runJoinScript(t, r.raw, h.url, nil, "gwk_example_key")
	if err != nil || !strings.Contains(out, "--master "+h.url) || !strings.Contains(out, "agent key: gwk_example_key") {
		t.Fatalf("join-node.sh: %v\n%s", err, out)
	}
	// The key reaches the agent in its environment; the agent's command
	// line, which any user of the machine can read, does not hold it.
	if cmdline := lineWith(out, "agent cmdline:"); cmdline == "" || strings.Contains(cmdline, "gwk_example_key") {
		t.Fatalf("the agent's command line: %q", cmdline)
	}
	out, _, err = runJoinScript(t, r.raw, h.url, nil, "--leave")
	if err != nil || !strings.Contains(out, "--leave") || !strings.Contains(out, "agent key: none") {
		t.Fatalf("join-node.sh --leave: %v\n%s", err, out)
	}
	sum := h.want(h.do("GET", "/v1/nodes/agent/linux/"+runtime.GOARCH+"/sha256", "", nil), 200, "agent sum")
	if len(strings.TrimSpace(string(sum.raw))) != 64 {
		t.Errorf("agent sum %q", sum.raw)
	}
	h.want(h.do("GET", "/v1/nodes/agent/windows/amd64", "", nil), 404, "an OS without an agent")
	if r := h.do("GET", "/v1/nodes/agent/linux/riscv64", "", nil); r.status != 404 || !strings.Contains(r.errorField("message"), "linux/amd64") {
		t.Errorf("an architecture without an agent: %d %s", r.status, r.raw)
	}
}

func lineWith(out, prefix string) string {
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, prefix) {
			return line
		}
	}
	return ""
}

// A master serving TLS hands out a join command that pins its key; the
// script fetches over HTTPS with that pin and passes it to the agent. A
// man in the middle (another key pair at the address the machine dials,
// relaying to the real master) is refused by curl: nothing is fetched
// through it, nothing runs, nothing is written.
func TestJoinScriptPinsTheMaster(t *testing.T) {
	h := agentHarness(t, true)
	_, key := h.mint("org")
	r := h.want(h.do("POST", "/v1/nodes/join-keys", testAdminToken, map[string]any{"kind": "org", "org": "acme", "ttl_seconds": 600}), 201, "mint")
	pin := h.tls.Pin.String()
	want := fmt.Sprintf(`d=$(mktemp -d) && curl -fsSL --pinnedpubkey %s -k https://203.0.113.7:%d/join-node.sh -o "$d/join-node.sh" && sudo MASTER_IP=203.0.113.7 MASTER_PIN=%s bash "$d/join-node.sh" %s`,
		pin, h.cfg.Port, pin, r.body["key"])
	if got := r.body["join_command"]; got != want {
		t.Fatalf("join_command\n got %s\nwant %s", got, want)
	}
	script := h.want(h.do("GET", "/join-node.sh", "", nil), 200, "join-node.sh").raw

	out, _, err := runJoinScript(t, script, h.url, []string{"MASTER_PIN=" + pin}, key)
	if err != nil || !strings.Contains(out, "--pin "+pin) || !strings.Contains(out, "agent key: "+key) {
		t.Fatalf("join-node.sh with the pin: %v\n%s", err, out)
	}

	mitm := manInTheMiddle(t, h.url)
	out, state, err := runJoinScript(t, script, mitm.url, []string{"MASTER_PIN=" + pin}, key)
	if err == nil || strings.Contains(out, "agent key:") {
		t.Fatalf("join-node.sh through a man in the middle ran: %v\n%s", err, out)
	}
	if n := mitm.relayed.Load(); n != 0 {
		t.Fatalf("curl sent %d requests through the man in the middle", n)
	}
	if entries, _ := os.ReadDir(state); len(entries) != 0 {
		t.Fatalf("the state directory after a refused download holds %v", entries)
	}

	// A pin with a plain-HTTP URL (curl would ignore the pin there): refused.
	out, _, err = runJoinScript(t, script, strings.Replace(h.url, "https://", "http://", 1), []string{"MASTER_PIN=" + pin}, key)
	if err == nil || !strings.Contains(out, "pins an https master") {
		t.Fatalf("join-node.sh with a pin and an http URL: %v\n%s", err, out)
	}

	// Without the pin a TLS master's script does not fall back to HTTP.
	out, _, err = runJoinScript(t, script, "", nil, key)
	if err == nil || !strings.Contains(out, "MASTER_PIN is missing") {
		t.Fatalf("join-node.sh without MASTER_PIN: %v\n%s", err, out)
	}
}

// manInTheMiddle terminates TLS with a key pair of its own and relays
// each request to target: someone on the path between the machine and
// its master.
type mitmServer struct {
	url     string
	relayed *atomic.Int64
}

func manInTheMiddle(t *testing.T, target string) mitmServer {
	t.Helper()
	dir := t.TempDir()
	kp, err := tlspin.LoadOrCreate(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), []netip.Addr{netip.MustParseAddr("127.0.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	to, _ := url.Parse(target)
	proxy := httputil.NewSingleHostReverseProxy(to)
	proxy.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	m := mitmServer{relayed: new(atomic.Int64)}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.relayed.Add(1)
		proxy.ServeHTTP(w, r)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{kp.Certificate}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	m.url = srv.URL
	return m
}

func TestJoinScriptRefusesAnAgentCutShort(t *testing.T) {
	// Over plain HTTP (dev mode) the checksum catches a download that
	// does not match what the master announced.
	master := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/sha256") {
			w.Write([]byte(strings.Repeat("0", 64) + "\n"))
			return
		}
		w.Write([]byte(fakeAgent))
	}))
	defer master.Close()
	out, _, err := runJoinScript(t, joinscript.Render(8800, false), master.URL, nil, "gwk_key")
	if err == nil || strings.Contains(out, "agent key") || !strings.Contains(out, "not running it") {
		t.Fatalf("an agent whose checksum does not match: %v\n%s", err, out)
	}
	h := newHarness(t, nil) // no AGENT_DIR
	if r := h.do("GET", "/v1/nodes/agent/linux/amd64", "", nil); r.status != 404 || !strings.Contains(r.errorField("message"), "Config.AgentDir") {
		t.Errorf("no agent directory: %d %s", r.status, r.raw)
	}
	out, _, err = runJoinScript(t, joinscript.Render(8800, false), h.url, nil, "gwk_key")
	if err == nil || !strings.Contains(out, "no agent") {
		t.Errorf("join-node.sh against a master without agents: %v\n%s", err, out)
	}
}

func TestWorkerImageDownload(t *testing.T) {
	image := filepath.Join(t.TempDir(), "worker.tar")
	content := []byte("an OCI archive, as far as this test is concerned")
	if err := os.WriteFile(image, content, 0o644); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, &harnessOptions{config: func(c *gridweave.Config) { c.WorkerImageTar = image }})
	r := h.want(h.do("GET", "/v1/nodes/worker-image", "", nil), 200, "worker image")
	sum := sha256.Sum256(content)
	if string(r.raw) != string(content) || r.header.Get("X-Image-Name") != "gridweave-worker:latest" || r.header.Get("X-Checksum-Sha256") != hex.EncodeToString(sum[:]) {
		t.Errorf("worker image: %q, headers %v", r.raw, r.header)
	}
	s := h.want(h.do("GET", "/v1/nodes/worker-image/sha256", "", nil), 200, "worker image sum")
	if strings.TrimSpace(string(s.raw)) != hex.EncodeToString(sum[:]) {
		t.Errorf("announced sum %q", s.raw)
	}
	none := newHarness(t, nil)
	if r := none.do("GET", "/v1/nodes/worker-image", "", nil); r.status != 404 || !strings.Contains(r.errorField("message"), "Config.WorkerImageTar") {
		t.Errorf("no worker image: %d %s", r.status, r.raw)
	}
}
