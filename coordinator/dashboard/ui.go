package dashboard

import (
	"bytes"
	"embed"
	"net/http"
	"regexp"
	"strings"
)

// uiFiles is the dashboard page, its panels and its scripts, embedded:
// GET /ui needs no CDN and no build step. A line <!--#include NAME--> of
// index.html is replaced by the file ui/NAME (a panel of its own:
// control.html); scripts (ui/*.js) are served at /ui/{file}.
//
//go:embed ui/*.html ui/*.js
var uiFiles embed.FS

var includeLine = regexp.MustCompile(`(?m)^<!--#include ([a-z0-9_-]+\.html)-->$`)

// uiPage returns index.html with its includes expanded.
func uiPage() ([]byte, error) {
	page, err := uiFiles.ReadFile("ui/index.html")
	if err != nil {
		return nil, err
	}
	var ierr error
	page = includeLine.ReplaceAllFunc(page, func(line []byte) []byte {
		part, err := uiFiles.ReadFile("ui/" + string(includeLine.FindSubmatch(line)[1]))
		if err != nil {
			ierr = err
		}
		return bytes.TrimRight(part, "\n")
	})
	return page, ierr
}

// Routes registers on mux GET /ui (the page, open: it holds no data and
// asks for the token, which it keeps in sessionStorage) and the JSON API it
// polls (api_dashboard.go), each wrapped in auth (the same bearer tokens as
// the coordinator's /v1/*; nil: none). src is the coordinator shown.
func (d *Dashboard) Routes(mux *http.ServeMux, src Source, auth func(http.Handler) http.Handler) {
	page, err := uiPage()
	if err != nil {
		panic("dashboard: ui/index.html or a file it includes not embedded: " + err.Error())
	}
	if auth == nil {
		auth = func(h http.Handler) http.Handler { return h }
	}
	a := &api{d: d, src: src}
	mux.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Cache-Control", "no-store")
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'unsafe-inline'")
		h.Set("X-Frame-Options", "DENY")
		w.Write(page)
	})
	mux.Handle("GET /v1/limiters", auth(http.HandlerFunc(a.handleLimiters)))
	mux.Handle("GET /v1/limiters/{name}/keys", auth(http.HandlerFunc(a.handleTopKeys)))
	mux.Handle("GET /v1/isolates", auth(http.HandlerFunc(a.handleIsolates)))
	mux.Handle("GET /v1/limiters/{name}/history", auth(http.HandlerFunc(a.handleHistory)))
	mux.HandleFunc("GET /ui/{file}", serveScript)
}

// serveScript answers GET /ui/{file}: a script of the page (ui/*.js), open
// like the page.
func serveScript(w http.ResponseWriter, r *http.Request) {
	f := r.PathValue("file")
	b, err := uiFiles.ReadFile("ui/" + f)
	if err != nil || !strings.HasSuffix(f, ".js") {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/javascript; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.Write(b)
}
