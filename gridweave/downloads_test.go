package gridweave_test

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"gridweave.dev/gridweave"
	"gridweave.dev/gridweave/node/joinscript"
)

// fakeAgent is a stand-in agent: it prints its arguments.
const fakeAgent = "#!/bin/sh\necho \"agent ran with: $*\"\n"

// runJoinScript runs the served join-node.sh with bash, as the join
// command does, against masterURL.
func runJoinScript(t *testing.T, script []byte, masterURL string, args ...string) (string, error) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "join-node.sh")
	if err := os.WriteFile(path, script, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", append([]string{path}, args...)...)
	cmd.Env = append(os.Environ(), "MASTER_IP=198.18.0.1", "MASTER_URL="+masterURL, "GRIDWEAVE_STATE_DIR="+filepath.Join(dir, "state"), "GRIDWEAVE_ALLOW_NON_ROOT=1")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestJoinScriptFetchesChecksAndRunsTheAgent(t *testing.T) {
	if runtime.GOOS != "linux" || (runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64") {
		t.Skip("join-node.sh serves linux/amd64 and linux/arm64 nodes")
	}
	agents := t.TempDir()
	if err := os.WriteFile(filepath.Join(agents, "join-node-linux-"+runtime.GOARCH), []byte(fakeAgent), 0o755); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, &harnessOptions{config: func(c *gridweave.Config) { c.AgentDir = agents }})
	r := h.want(h.do("GET", "/join-node.sh", "", nil), 200, "join-node.sh")
	if !strings.Contains(string(r.raw), "http://${MASTER_IP}:8800") {
		t.Errorf("the script does not default to the server's port:\n%s", r.raw)
	}
	out, err := runJoinScript(t, r.raw, h.url, "gwk_example_key")
	if err != nil || !strings.Contains(out, "agent ran with: --master "+h.url) || !strings.Contains(out, "--key gwk_example_key") {
		t.Fatalf("join-node.sh: %v\n%s", err, out)
	}
	out, err = runJoinScript(t, r.raw, h.url, "--leave")
	if err != nil || !strings.Contains(out, "--leave") {
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

func TestJoinScriptRefusesABadChecksum(t *testing.T) {
	master := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/sha256") {
			w.Write([]byte(strings.Repeat("0", 64) + "\n"))
			return
		}
		w.Write([]byte(fakeAgent))
	}))
	defer master.Close()
	out, err := runJoinScript(t, joinscript.Render(8800), master.URL, "gwk_key")
	if err == nil || strings.Contains(out, "agent ran") || !strings.Contains(out, "not running it") {
		t.Fatalf("a tampered agent: %v\n%s", err, out)
	}
	h := newHarness(t, nil) // no AGENT_DIR
	if r := h.do("GET", "/v1/nodes/agent/linux/amd64", "", nil); r.status != 404 || !strings.Contains(r.errorField("message"), "AGENT_DIR") {
		t.Errorf("no agent directory: %d %s", r.status, r.raw)
	}
	out, err = runJoinScript(t, joinscript.Render(8800), h.url, "gwk_key")
	if err == nil || !strings.Contains(out, "has no agent") {
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
	if r := none.do("GET", "/v1/nodes/worker-image", "", nil); r.status != 404 || !strings.Contains(r.errorField("message"), "WORKER_IMAGE_TAR") {
		t.Errorf("no worker image: %d %s", r.status, r.raw)
	}
}
