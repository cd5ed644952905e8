package main

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSIGTERMFinishesInFlightRequests builds the binary, starts a request
// whose body is still arriving, sends SIGTERM, completes the body, and
// expects the answer and then an exit status of 0.
func TestSIGTERMFinishesInFlightRequests(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary; run make test")
	}
	bin := filepath.Join(t.TempDir(), "server")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	addr := freeAddr(t)
	cmd := exec.Command(bin, "--dev", "--addr", addr)
	cmd.Env = append(os.Environ(), "KUBERAY_DB="+filepath.Join(t.TempDir(), "k.db"), "KUBECONFIG=", "WG_INTERFACE=none")
	stdout := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = stdout, &syncBuffer{}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the binary did not come up: %s", cmd.Stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	token := regexp.MustCompile(`admin token of this run is ([0-9a-f]+)`).FindStringSubmatch(stdout.String())
	if token == nil {
		t.Fatalf("no admin token printed: %q", stdout.String())
	}

	body := `{"kind":"org","org":"acme","ttl_seconds":60}`
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/nodes/join-keys HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", token[1], len(body), body[:10])
	time.Sleep(300 * time.Millisecond) // the handler is reading the body
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	fmt.Fprint(conn, body[10:])
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("the in-flight request got no answer: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Errorf("the in-flight mint: %d, want 201", resp.StatusCode)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v (want status 0)", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("still running 10 s after SIGTERM")
	}
	if !strings.Contains(fmt.Sprint(cmd.Stderr), "shutting down") {
		t.Error("the log does not say it shut down")
	}
}
