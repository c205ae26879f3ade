package coordinator

import (
	_ "embed"
	"net/http"
)

// The dashboard: one page embedded in the binary (no CDN, no build step),
// polling the JSON API of api.go and /healthz every two seconds. The page
// asks for a bearer token when the API wants one and keeps it in the
// browser session (sessionStorage).
//
//go:embed ui/index.html
var uiPage []byte

func serveUI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'")
	w.Write(uiPage)
}
