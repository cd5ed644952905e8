package launchcli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// lspClient speaks LSP to the launcher's server over pipes, as an editor
// does.
type lspClient struct {
	t    *testing.T
	in   io.WriteCloser
	out  *bufio.Reader
	done chan int
	id   int
}

func startLSP(t *testing.T) *lspClient {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := &lspClient{t: t, in: inW, out: bufio.NewReader(outR), done: make(chan int, 1)}
	go func() {
		var stderr bytes.Buffer
		code := Run(context.Background(), []string{"lsp"}, inR, outW, &stderr)
		outW.Close()
		c.done <- code
	}()
	return c
}

func (c *lspClient) send(method string, params any, request bool) {
	c.t.Helper()
	m := map[string]any{"jsonrpc": "2.0", "method": method, "params": params}
	if request {
		c.id++
		m["id"] = c.id
	}
	body, _ := json.Marshal(m)
	if _, err := fmt.Fprintf(c.in, "Content-Length: %d\r\n\r\n%s", len(body), body); err != nil {
		c.t.Fatal(err)
	}
}

// next reads the server's next message, bounded in time.
func (c *lspClient) next() map[string]any {
	c.t.Helper()
	got := make(chan map[string]any, 1)
	go func() {
		length := 0
		for {
			line, err := c.out.ReadString('\n')
			if err != nil {
				got <- nil
				return
			}
			line = strings.TrimSpace(line)
			if line == "" {
				break
			}
			fmt.Sscanf(line, "Content-Length: %d", &length)
		}
		body := make([]byte, length)
		if _, err := io.ReadFull(c.out, body); err != nil {
			got <- nil
			return
		}
		var m map[string]any
		_ = json.Unmarshal(body, &m)
		got <- m
	}()
	select {
	case m := <-got:
		if m == nil {
			c.t.Fatal("the server closed its output")
		}
		return m
	case <-time.After(30 * time.Second):
		c.t.Fatal("no message from the server within 30 s")
		return nil
	}
}

// diagnostics opens or changes a document and returns what the server
// publishes for it.
func (c *lspClient) diagnostics(method, uri, text string) []map[string]any {
	c.t.Helper()
	if method == "textDocument/didOpen" {
		c.send(method, map[string]any{"textDocument": map[string]any{"uri": uri, "languageId": "yaml", "version": 1, "text": text}}, false)
	} else {
		c.send(method, map[string]any{"textDocument": map[string]any{"uri": uri, "version": 2}, "contentChanges": []any{map[string]any{"text": text}}}, false)
	}
	m := c.next()
	params, _ := m["params"].(map[string]any)
	if m["method"] != "textDocument/publishDiagnostics" || params["uri"] != uri {
		c.t.Fatalf("the server answered %v", m)
	}
	var out []map[string]any
	for _, d := range params["diagnostics"].([]any) {
		out = append(out, d.(map[string]any))
	}
	return out
}

// TestLanguageServer: an LSP client opens a Kubernetes manifest with a
// mistake and gets lint's finding as a diagnostic on its line, with the
// rule as its code; fixing it clears it; a recipe's unknown field is a
// diagnostic at its line; shutdown and exit end the server with 0.
func TestLanguageServer(t *testing.T) {
	c := startLSP(t)
	c.send("initialize", map[string]any{"processId": nil, "rootUri": nil, "capabilities": map[string]any{}}, true)
	init := c.next()
	caps, _ := init["result"].(map[string]any)["capabilities"].(map[string]any)
	if caps["textDocumentSync"] == nil {
		t.Fatalf("initialize: %v", init)
	}
	c.send("initialized", map[string]any{}, false)

	broken := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: a\n    image: busybox\n    env:\n    - {name: A, value: \"1\"}\n    - {name: A, value: \"2\"}\n"
	ds := c.diagnostics("textDocument/didOpen", "file:///work/pod.yaml", broken)
	if len(ds) != 1 || ds[0]["code"] != "duplicate-env" || ds[0]["severity"] != float64(2) {
		t.Fatalf("diagnostics of the broken pod: %v", ds)
	}
	if start := ds[0]["range"].(map[string]any)["start"].(map[string]any); start["line"] != float64(10) {
		t.Errorf("the diagnostic is on line %v (0-based), want 10", start["line"])
	}
	fixed := strings.Replace(broken, "{name: A, value: \"2\"}", "{name: B, value: \"2\"}", 1)
	if ds := c.diagnostics("textDocument/didChange", "file:///work/pod.yaml", fixed); len(ds) != 0 {
		t.Errorf("after the fix: %v", ds)
	}
	recipe := "name: a\nentrypoint: x\nfleets: {t: {replicas: 1}}\ninference: {backend: vllm}\noverides: []\n"
	ds = c.diagnostics("textDocument/didOpen", "file:///work/train.recipe.yaml", recipe)
	if len(ds) != 1 || !strings.Contains(ds[0]["message"].(string), `did you mean "overrides"`) ||
		ds[0]["range"].(map[string]any)["start"].(map[string]any)["line"] != float64(4) {
		t.Errorf("diagnostics of the recipe: %v", ds)
	}
	// A frame that is not JSON gets a parse error; the server goes on.
	if _, err := fmt.Fprintf(c.in, "Content-Length: 9\r\n\r\nnot json!"); err != nil {
		t.Fatal(err)
	}
	if m := c.next(); m["error"].(map[string]any)["code"] != float64(-32700) {
		t.Errorf("a frame that is not JSON: %v", m)
	}
	c.send("textDocument/hover", map[string]any{}, true)
	if m := c.next(); m["error"] == nil {
		t.Errorf("an unknown request: %v", m)
	}
	c.send("shutdown", nil, true)
	if m := c.next(); m["id"] == nil {
		t.Errorf("shutdown: %v", m)
	}
	c.send("exit", nil, false)
	c.in.Close()
	select {
	case code := <-c.done:
		if code != 0 {
			t.Errorf("the server exited %d", code)
		}
	case <-time.After(10 * time.Second):
		t.Error("the server did not exit")
	}
}
