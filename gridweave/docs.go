package gridweave

import (
	"bytes"
	"embed"
	"io/fs"
	"net/http"
	"path"
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

// handleDocs answers the interactive API page.
func (s *Server) handleDocs(w http.ResponseWriter, r *http.Request) {
	s.serveDocsFile(w, r, "index.html")
}

// handleDocsAsset answers one of the page's files (the renderer, its
// stylesheet, its licence).
func (s *Server) handleDocsAsset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	if name == "index.html" || !fs.ValidPath(name) || strings.Contains(name, "/") {
		s.writeError(w, r, &apiError{code: api.CodeNoSuchRoute, message: "no route " + r.Method + " " + r.URL.Path})
		return
	}
	s.serveDocsFile(w, r, name)
}

func (s *Server) serveDocsFile(w http.ResponseWriter, r *http.Request, name string) {
	s.serveEmbedded(w, r, webdocsFS, "webdocs", name, docsPolicy)
}

// serveEmbedded answers one file of a page embedded in the binary (the
// docs page, the console) under its Content-Security-Policy; a name that
// is not one of its files is 404.
func (s *Server) serveEmbedded(w http.ResponseWriter, r *http.Request, files fs.FS, dir, name, policy string) {
	data, err := fs.ReadFile(files, path.Join(dir, name))
	if name == "" || err != nil || !fs.ValidPath(name) || strings.Contains(name, "/") {
		s.writeError(w, r, &apiError{code: api.CodeNoSuchRoute, message: "no route " + r.Method + " " + r.URL.Path})
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
