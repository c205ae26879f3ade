package syncloop

import (
	"fmt"
	"mime"
	"net/http"
	"strconv"
)

// notAReply returns an error for a 200 answer to a sync that is a web page
// (Content-Type text/html): a proxy, captive portal or load balancer
// answering in the coordinator's place. It names the URL's answer and its
// start, where the module's decoder said only "malformed input". Such an
// answer fails the attempt as a 502 does: the batch goes to the next
// coordinator of the list. Only HTML is refused: a coordinator answers
// application/msgpack, and servers that do not set the type (test
// doubles, some proxies) are sniffed by net/http, never as HTML for a
// msgpack reply.
func notAReply(resp *http.Response, body []byte) error {
	ct := resp.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || mt != "text/html" {
		return nil
	}
	start := body
	if len(start) > 120 {
		start = start[:120]
	}
	return fmt.Errorf("syncloop: http: %w: %s %s answered 200 with Content-Type %q, a web page, not the coordinator's msgpack reply (a proxy or captive portal in the way?): %s",
		ErrRefused, resp.Request.Method, resp.Request.URL.Redacted(), ct, strconv.Quote(string(start)))
}
