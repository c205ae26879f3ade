package coordinator

import (
	"embed"
	"net/http"
)

// uiFiles is the dashboard page, embedded: GET /ui needs no CDN and no
// build step.
//
//go:embed ui/index.html
var uiFiles embed.FS

// dashboardRoutes registers GET /ui (the page, open: it holds no data and
// asks for the token, which it keeps in sessionStorage) and the JSON API it
// polls (api_dashboard.go), behind the same tokens as /v1/*.
func (c *Coordinator) dashboardRoutes(mux *http.ServeMux) {
	page, err := uiFiles.ReadFile("ui/index.html")
	if err != nil {
		panic("coordinator: ui/index.html not embedded: " + err.Error())
	}
	mux.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Cache-Control", "no-store")
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'")
		h.Set("X-Frame-Options", "DENY")
		w.Write(page)
	})
	mux.Handle("GET /v1/limiters", c.auth(http.HandlerFunc(c.handleLimiters)))
	mux.Handle("GET /v1/limiters/{name}/keys", c.auth(http.HandlerFunc(c.handleTopKeys)))
	mux.Handle("GET /v1/isolates", c.auth(http.HandlerFunc(c.handleIsolates)))
}
