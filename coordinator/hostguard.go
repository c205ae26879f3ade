package coordinator

import (
	"net"
	"net/http"

	"github.com/edgelimit/edgelimit/internal/hostcheck"
)

// guardHost returns h as Serve answers on ln: on a loopback listener,
// requests whose Host is neither a loopback name or address nor one of
// Options.AllowedHosts are refused 403 (package hostcheck). A coordinator
// without tokens on loopback has no other defence against DNS rebinding:
// a page of a name pointed at 127.0.0.1 is same-origin with it, so the
// browser lets it read /v1/control and the cross-origin check
// (sameOrigin) lets its pauses through. On other addresses (tokens
// required, or --insecure) any Host is answered.
func (c *Coordinator) guardHost(ln net.Listener, h http.Handler) http.Handler {
	return hostcheck.Guard(ln, h, c.opts.AllowedHosts, func(w http.ResponseWriter, detail string) {
		c.fail(w, http.StatusForbidden, "forbidden", "Host", "Host not allowed", detail)
	})
}
