package host

import (
	"fmt"
	"net/http"
)

// capBody caps r's body at max bytes (http.MaxBytesReader, a 413 once
// more is read) and answers 413 at once, returning false, when its
// declared Content-Length is already above max: the host does not wait for
// a body it will refuse (a slow client would hold the request until
// --read-timeout).
func capBody(w http.ResponseWriter, r *http.Request, max int64) bool {
	if r.ContentLength > max {
		w.Header().Set("Connection", "close")
		problem(w, http.StatusRequestEntityTooLarge, "body",
			fmt.Sprintf("host: the body declares %d bytes, more than the %d taken (--max-body)", r.ContentLength, max))
		return false
	}
	r.Body = http.MaxBytesReader(w, r.Body, max)
	return true
}
