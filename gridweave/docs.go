package gridweave

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"net/http"
	"net/netip"
	"path"
	"strconv"
	"strings"
	"time"

	"gridweave.dev/gridweave/api"
)

// GET /docs is Swagger UI (vendored in webdocs/, embedded) pointed at
// GET /openapi.json; both are open without credentials.

// webdocsFS holds the docs page: Swagger UI (see webdocs/README.md) and
// our own index.html and start-up script.
//
//go:embed webdocs/index.html webdocs/gridweave-docs.js webdocs/swagger-ui-bundle.js webdocs/swagger-ui.css
//go:embed webdocs/LICENSE webdocs/NOTICE webdocs/swagger-ui-bundle.js.LICENSE.txt
var webdocsFS embed.FS

// docsPolicy keeps the docs page to this origin: scripts, styles, images
// and the requests a person tries out all go to this service only.
const docsPolicy = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
	"font-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// pageRoutes serve the pages: the API's document and its interactive
// page, and the web console.
type pageRoutes struct {
	responder
	cfg     *Config
	openapi func() ([]byte, error)
}

// handleOpenAPI answers the OpenAPI document.
func (p *pageRoutes) handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	doc, err := p.openapi()
	if err != nil {
		p.writeError(w, r, fmt.Errorf("build the OpenAPI document: %w", err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(doc)
}

// handleDocs answers the interactive API page.
func (p *pageRoutes) handleDocs(w http.ResponseWriter, r *http.Request) {
	p.serveDocsFile(w, r, "index.html")
}

// handleDocsAsset answers one of the page's files (the renderer, its
// stylesheet, its licence).
func (p *pageRoutes) handleDocsAsset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	if name == "index.html" || !fs.ValidPath(name) || strings.Contains(name, "/") {
		p.writeError(w, r, &apiError{code: api.CodeNoSuchRoute, message: "no route " + r.Method + " " + r.URL.Path})
		return
	}
	p.serveDocsFile(w, r, name)
}

func (p *pageRoutes) serveDocsFile(w http.ResponseWriter, r *http.Request, name string) {
	p.serveEmbedded(w, r, webdocsFS, "webdocs", name, docsPolicy)
}

// serveEmbedded answers one file of a page embedded in the binary (the
// docs page, the console) under its Content-Security-Policy; a name that
// is not one of its files is 404.
func (p *pageRoutes) serveEmbedded(w http.ResponseWriter, r *http.Request, files fs.FS, dir, name, policy string) {
	data, err := fs.ReadFile(files, path.Join(dir, name))
	if name == "" || err != nil || !fs.ValidPath(name) || strings.Contains(name, "/") {
		p.writeError(w, r, &apiError{code: api.CodeNoSuchRoute, message: "no route " + r.Method + " " + r.URL.Path})
		return
	}
	h := w.Header()
	h.Set("Content-Security-Policy", policy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	switch path.Ext(name) {
	case ".html":
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Cache-Control", "no-cache")
	case ".js":
		h.Set("Content-Type", "text/javascript; charset=utf-8")
	case ".css":
		h.Set("Content-Type", "text/css; charset=utf-8")
	default:
		h.Set("Content-Type", "text/plain; charset=utf-8")
	}
	// The files are part of the binary: the build is their version.
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(data))
}

// handleConsole answers the console's page (GET /ui/) and its files; to
// loopback callers only when the listener's certificate is one no browser
// can verify (Config.ConsoleLoopbackOnly).
func (p *pageRoutes) handleConsole(w http.ResponseWriter, r *http.Request) {
	if p.cfg.ConsoleLoopbackOnly() {
		if ip, err := netip.ParseAddr(clientIP(r)); err != nil || !ip.Unmap().IsLoopback() {
			p.writeError(w, r, &apiError{code: api.CodeConsoleLoopbackOnly,
				message: "this server's certificate is its own, which no browser can verify: the console is served on loopback only. " +
					"Forward a port (ssh -L 8800:127.0.0.1:" + strconv.Itoa(p.cfg.Port) + " <master>) and open https://127.0.0.1:8800/ui/, " +
					"or give the server a certificate browsers trust (" + p.cfg.Name("TLSCertFile") + ", " + p.cfg.Name("TLSKeyFile") + "), or turn " + p.cfg.Name("ConsolePublic") + " on"})
			return
		}
	}
	name := r.PathValue("file")
	if r.URL.Path == "/ui/" {
		name = "index.html"
	}
	p.serveEmbedded(w, r, consoleFS, "console", name, consolePolicy)
}

// consoleFS holds the console (see console/README.md).
//
//go:embed console/index.html console/console.js console/console.css
var consoleFS embed.FS

// consolePolicy keeps the console to this origin, with no inline script
// or style at all.
const consolePolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// routes are the pageRoutes routes.
func (p *pageRoutes) routes() []route {
	anyObject := anyObjectDoc{}
	return []route{
		{pattern: "GET /openapi.json", auth: authNone, on: onPublic, handler: p.handleOpenAPI,
			doc: operation{id: "openapi", tag: "docs", summary: "This OpenAPI 3.1 document",
				status: 200, response: anyObject}},
		{pattern: "GET /docs", auth: authNone, on: onPublic, handler: p.handleDocs,
			doc: operation{id: "docs", tag: "docs", summary: "The interactive API page (Swagger UI)",
				status: 200, responseType: "text/html", response: ""}},
		{pattern: "GET /docs/{file}", auth: authNone, on: onPublic, handler: p.handleDocsAsset,
			doc: operation{id: "docsAsset", tag: "docs", summary: "A file of the API page (renderer, stylesheet, licence)",
				status: 200, responseType: "text/plain", response: "", codes: []string{api.CodeNoSuchRoute}}},
		{pattern: "GET /ui/", auth: authNone, on: onPublic, handler: p.handleConsole,
			doc: operation{id: "console", tag: "docs", summary: "The web console: nodes, keys, clusters and jobs (sign in with the admin token, an admin JWT or a user JWT)",
				description: "With the certificate the server made itself (HTTPS without a certificate of the operator's), served to loopback callers only (403 `console_loopback_only`) unless the console is made public.",
				status:      200, responseType: "text/html", response: "", codes: []string{api.CodeConsoleLoopbackOnly, api.CodeNoSuchRoute}}},
		{pattern: "GET /ui/{file}", auth: authNone, on: onPublic, handler: p.handleConsole,
			doc: operation{id: "consoleAsset", tag: "docs", summary: "A file of the web console (script, stylesheet, licence)",
				status: 200, responseType: "text/plain", response: "", codes: []string{api.CodeConsoleLoopbackOnly, api.CodeNoSuchRoute}}},
	}
}
