package launchcli

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"gridweave.dev/manifest"
	"gridweave.dev/manifest/validation"
)

// `launcher lsp` is a language server over stdio (LSP 3.17, JSON-RPC with
// Content-Length framing): as a file is opened or edited, it publishes
// lint's findings for Kubernetes YAML, and the strict parser's error for
// the launcher's own files (*.recipe.yaml, *.infra.yaml, *values*.yaml
// with a `# gridweave: chart-values` line), as diagnostics. Editors start
// it as `launcher lsp`.

func lspCommand(validator func() (*validation.Validator, error), stdin io.Reader, stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "lsp",
		Short: "A language server over stdio: lint's findings as diagnostics while a file is edited",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := validator()
			if err != nil {
				return err
			}
			return serveLSP(v, stdin, stdout)
		},
	}
}

type rpcMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

type lspPosition struct {
	Line      int `json:"line"`
	Character int `json:"character"`
}

type lspRange struct {
	Start lspPosition `json:"start"`
	End   lspPosition `json:"end"`
}

type lspDiagnostic struct {
	Range    lspRange `json:"range"`
	Severity int      `json:"severity"` // 1 error, 2 warning
	Code     string   `json:"code,omitempty"`
	Source   string   `json:"source"`
	Message  string   `json:"message"`
}

func serveLSP(v *validation.Validator, in io.Reader, out io.Writer) error {
	r := bufio.NewReader(in)
	var mu sync.Mutex
	send := func(m rpcMessage) error {
		m.JSONRPC = "2.0"
		body, err := json.Marshal(m)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		_, err = fmt.Fprintf(out, "Content-Length: %d\r\n\r\n%s", len(body), body)
		return err
	}
	shutdown := false
	for {
		msg, err := readRPC(r)
		if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil
		}
		var bad *badMessage
		if errors.As(err, &bad) {
			// The frame is consumed: say so, and go on with the next.
			if err := send(rpcMessage{ID: json.RawMessage("null"), Error: &rpcError{Code: -32700, Message: bad.Error()}}); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		switch msg.Method {
		case "initialize":
			err = send(rpcMessage{ID: msg.ID, Result: map[string]any{
				"capabilities": map[string]any{"textDocumentSync": map[string]any{"openClose": true, "change": 1, "save": map[string]any{"includeText": true}}},
				"serverInfo":   map[string]any{"name": "gridweave-lint", "version": toolVersion()},
			}})
		case "textDocument/didOpen", "textDocument/didChange", "textDocument/didSave":
			var p struct {
				TextDocument struct {
					URI  string `json:"uri"`
					Text string `json:"text"`
				} `json:"textDocument"`
				ContentChanges []struct {
					Text string `json:"text"`
				} `json:"contentChanges"`
				Text *string `json:"text"`
			}
			if err := json.Unmarshal(msg.Params, &p); err != nil {
				continue
			}
			text := p.TextDocument.Text
			if n := len(p.ContentChanges); n > 0 {
				text = p.ContentChanges[n-1].Text // full sync: the whole text
			} else if p.Text != nil {
				text = *p.Text
			}
			err = send(rpcMessage{Method: "textDocument/publishDiagnostics", Params: mustJSON(map[string]any{
				"uri": p.TextDocument.URI, "diagnostics": diagnose(v, p.TextDocument.URI, text)})})
		case "textDocument/didClose":
			var p struct {
				TextDocument struct {
					URI string `json:"uri"`
				} `json:"textDocument"`
			}
			_ = json.Unmarshal(msg.Params, &p)
			err = send(rpcMessage{Method: "textDocument/publishDiagnostics", Params: mustJSON(map[string]any{"uri": p.TextDocument.URI, "diagnostics": []lspDiagnostic{}})})
		case "shutdown":
			shutdown = true
			err = send(rpcMessage{ID: msg.ID, Result: json.RawMessage("null")})
		case "exit":
			if !shutdown {
				return errors.New("lsp: exit before shutdown")
			}
			return nil
		default:
			if msg.ID != nil && msg.Method != "" { // a request we do not serve
				err = send(rpcMessage{ID: msg.ID, Error: &rpcError{Code: -32601, Message: "method not found: " + msg.Method}})
			}
		}
		if err != nil {
			return err
		}
	}
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// badMessage is a frame the server read whole but cannot use.
type badMessage struct{ problem string }

func (b *badMessage) Error() string { return "lsp: " + b.problem }

// maxMessage bounds one message.
const maxMessage = 64 << 20

// readRPC reads one Content-Length framed message; a frame it cannot use
// is *badMessage, after it was consumed.
func readRPC(r *bufio.Reader) (rpcMessage, error) {
	length := -1
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return rpcMessage{}, err
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			break
		}
		if name, value, ok := strings.Cut(line, ":"); ok && strings.EqualFold(strings.TrimSpace(name), "Content-Length") {
			if n, err := strconv.Atoi(strings.TrimSpace(value)); err == nil {
				length = n
			}
		}
	}
	if length < 0 {
		return rpcMessage{}, &badMessage{"a message without a usable Content-Length"}
	}
	if length > maxMessage {
		if _, err := io.CopyN(io.Discard, r, int64(length)); err != nil {
			return rpcMessage{}, err
		}
		return rpcMessage{}, &badMessage{fmt.Sprintf("a message of %d bytes, more than %d", length, maxMessage)}
	}
	body := make([]byte, length)
	if _, err := io.ReadFull(r, body); err != nil {
		return rpcMessage{}, err
	}
	var m rpcMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return rpcMessage{}, &badMessage{"the message is not JSON: " + err.Error()}
	}
	return m, nil
}

// diagnose lints one document's text as its name says it is.
func diagnose(v *validation.Validator, uri, text string) []lspDiagnostic {
	name := uri
	if u, err := url.Parse(uri); err == nil && u.Path != "" {
		name = u.Path
	}
	base := path.Base(name)
	lines := strings.Split(text, "\n")
	at := func(line int) lspRange {
		if line < 1 || line > len(lines) {
			return lspRange{}
		}
		l := lines[line-1]
		start := len(l) - len(strings.TrimLeft(l, " \t-"))
		return lspRange{Start: lspPosition{line - 1, start}, End: lspPosition{line - 1, len(l)}}
	}
	var parse func(string, []byte) error
	switch {
	case strings.HasSuffix(base, ".recipe.yaml"):
		parse = func(f string, d []byte) error { _, err := manifest.ParseRecipe(f, d); return err }
	case strings.HasSuffix(base, ".infra.yaml"):
		parse = func(f string, d []byte) error { _, err := manifest.ParseInfra(f, d); return err }
	case strings.Contains(text, "# gridweave: chart-values"):
		parse = func(f string, d []byte) error { _, err := manifest.ParseChartValues(f, d); return err }
	}
	out := []lspDiagnostic{}
	if parse != nil {
		err := parse(base, []byte(text))
		var se *manifest.SpecError
		switch {
		case errors.As(err, &se):
			msg := se.Problem
			if se.Path != "" {
				msg = se.Path + ": " + msg
			}
			out = append(out, lspDiagnostic{Range: at(max(se.Line, 1)), Severity: 1, Source: "gridweave", Message: msg})
		case err != nil:
			out = append(out, lspDiagnostic{Range: at(1), Severity: 1, Source: "gridweave", Message: err.Error()})
		}
		return out
	}
	docs, err := validation.ReadDocuments(base, strings.NewReader(text))
	if err != nil {
		return append(out, lspDiagnostic{Range: at(1), Severity: 1, Source: "gridweave-lint", Message: err.Error()})
	}
	// The lint config of the file's directory or above applies, as on the
	// command line.
	var cfg *validation.Config
	if dir := path.Dir(name); strings.HasPrefix(name, "/") {
		if found, err := validation.FindConfig(dir); err == nil && found != "" {
			cfg, _ = validation.LoadConfig(found)
		}
	}
	if cfg.Excluded(name) {
		return out
	}
	kept, _ := validation.Suppress(validation.Lint(v, docs), map[string][]byte{base: []byte(text)}, cfg)
	for _, f := range kept {
		sev := 2
		if f.Severity == validation.SeverityError {
			sev = 1
		}
		msg := f.Message
		if f.Path != "" {
			msg = f.Path + ": " + msg
		}
		if f.Fix != "" {
			msg += " (fix: " + f.Fix + ")"
		}
		out = append(out, lspDiagnostic{Range: at(max(f.Line, 1)), Severity: sev, Code: f.ID, Source: "gridweave-lint", Message: msg})
	}
	return out
}
