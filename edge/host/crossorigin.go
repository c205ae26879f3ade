package host

import "net/http"

// sameOrigin refuses, 403, what a browser sends to the host from a page of
// another site (http.CrossOriginProtection: Sec-Fetch-Site, or Origin
// against Host): such a page could otherwise spend any key's budget with
// an <img> whose src is a GET /v1/decide, or pause a key with a text/plain
// POST /v1/observe, neither of which needs a preflight, on a host its
// user's machine reaches (loopback, an internal network). Decisions
// (/v1/decide, /v1/wait) are checked for every method, since a GET spends
// too; other requests for the unsafe methods. Clients that are not
// browsers (curl, servers) send neither header and pass, as do pages of
// the host's own origin.
func sameOrigin(next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chk := r
		if r.URL.Path == "/v1/decide" || r.URL.Path == "/v1/wait" {
			c := *r
			c.Method = http.MethodPost // Check passes the safe methods
			chk = &c
		}
		if err := cop.Check(chk); err != nil {
			problem(w, http.StatusForbidden, "Origin", r.Method+" "+r.URL.Path+
				" from a page of another site is refused (a browser's cross-origin request)")
			return
		}
		next.ServeHTTP(w, r)
	})
}
