// Package hostcheck guards a server bound to loopback against DNS
// rebinding: a web page of a name its attacker points at 127.0.0.1 reaches
// the server as its own origin, so the browser's cross-origin checks
// (http.CrossOriginProtection) let its requests, reads included, through.
// Such a request still names the attacker's host in its Host header; the
// server answers only Host headers that name loopback (localhost, a
// *.localhost name, an address in 127.0.0.0/8 or ::1) or a name the
// operator allows (a reverse proxy's, say).
package hostcheck

import (
	"net"
	"net/http"
	"strconv"
	"strings"
)

// Any, in an allowed list, allows every Host (the check is off).
const Any = "*"

// Loopback reports whether addr, a listener's address, accepts loopback
// connections only (an IP in 127.0.0.0/8 or ::1; a Unix socket is not).
func Loopback(addr net.Addr) bool {
	a, ok := addr.(*net.TCPAddr)
	return ok && a.IP.IsLoopback()
}

// Allowed reports whether the Host header host (with or without a port,
// any case, a trailing dot or not) names loopback or one of allowed (host
// names without ports, Any for every host). An empty Host (HTTP/1.0,
// which no browser sends) is allowed.
func Allowed(host string, allowed []string) bool {
	if host == "" {
		return true
	}
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.TrimSuffix(strings.ToLower(strings.Trim(name, "[]")), ".")
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return true
	}
	if ip := net.ParseIP(name); ip != nil && ip.IsLoopback() {
		return true
	}
	for _, a := range allowed {
		if a == Any || strings.TrimSuffix(strings.ToLower(a), ".") == name {
			return true
		}
	}
	return false
}

// Parse splits a comma-separated list of allowed hosts (the
// --allowed-hosts flag), trimming spaces, ports and an IPv6 literal's
// brackets and dropping empty names.
func Parse(list string) []string {
	var out []string
	for _, h := range strings.Split(list, ",") {
		h = strings.TrimSpace(h)
		if name, _, err := net.SplitHostPort(h); err == nil {
			h = name
		}
		h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]") // an IPv6 literal without a port, as Allowed compares it
		if h != "" {
			out = append(out, h)
		}
	}
	return out
}

// Guard returns next as a server answers on ln: on a loopback listener
// (Loopback), a request whose Host is not Allowed is answered by deny,
// which must write a 403 or similar, with the detail to say (Refusal),
// and goes no further; on other addresses every Host is answered (they
// need tokens, or the operator chose to listen there).
func Guard(ln net.Listener, next http.Handler, allowed []string, deny func(w http.ResponseWriter, detail string)) http.Handler {
	if !Loopback(ln.Addr()) {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !Allowed(r.Host, allowed) {
			deny(w, Refusal(r.Host))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Refusal is the detail of the answer to a request whose Host header host
// is not allowed (quoted, cut to 100 bytes).
func Refusal(host string) string {
	if len(host) > 100 {
		host = host[:100] + "..."
	}
	return "this server listens on loopback and answers loopback Host names (localhost, 127.0.0.1, [::1]) " +
		"and those of --allowed-hosts only, not " + strconv.Quote(host) + " (a page of another site through DNS rebinding?)"
}
