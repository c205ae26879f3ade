package host

import (
	"net"
	"net/http"

	"github.com/edgelimit/edgelimit/internal/hostcheck"
)

// guardHost returns h as Serve answers on ln: on a loopback listener,
// requests whose Host is neither a loopback name or address nor one of
// ServerOptions.AllowedHosts are refused 403 (package hostcheck), against
// DNS rebinding: a page of a name pointed at 127.0.0.1 is same-origin
// with the host, so the cross-origin check (crossorigin.go) lets its
// decisions through. On other addresses any Host is answered.
func (h *Host) guardHost(ln net.Listener, next http.Handler) http.Handler {
	return hostcheck.Guard(ln, next, h.opts.Server.AllowedHosts, func(w http.ResponseWriter, detail string) {
		problem(w, http.StatusForbidden, "Host", detail)
	})
}
