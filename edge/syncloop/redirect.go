package syncloop

import (
	"net/http"
	"strconv"
)

// NoRedirect is the CheckRedirect of the sync transport's HTTP clients
// (the default one, and the edge host's): a coordinator never answers with
// a redirect, and following one posts the batch (its key names) to
// wherever the answer points, or turns it into a GET (301, 302). The 3xx
// itself is the answer, refused naming its Location (redirectNote), so a
// URL that needs another (http:// behind an https:// redirect, a path a
// proxy moved) says so in the log instead of failing as something else.
func NoRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// redirectNote returns, for a redirect answer, the words that name where
// it points ("; a redirect to URL: give that URL"), or "" for any other.
func redirectNote(resp *http.Response) string {
	if resp.StatusCode < 300 || resp.StatusCode > 399 {
		return ""
	}
	return "; a redirect to " + strconv.Quote(resp.Header.Get("Location")) + ", which the sync does not follow: give the coordinator's own URL"
}
