package host

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestDNSRebindingRefused: a host on loopback answered any Host, so a page
// of a name its attacker points at 127.0.0.1 (DNS rebinding) was
// same-origin with it and spent a key's budget. Requests whose Host is
// neither loopback nor in ServerOptions.AllowedHosts are refused 403
// and spend nothing; loopback names and addresses and allowed names pass.
func TestDNSRebindingRefused(t *testing.T) {
	s := serve(t, Options{Config: config(wire.Approximate, 100), Isolates: 1, RetryWait: -1,
		Server: ServerOptions{AllowedHosts: []string{"edge.internal"}}})
	port := s.url[strings.LastIndex(s.url, ":"):]
	decide := func(host string, cost int) (int, decisionJSON) {
		t.Helper()
		q := url.Values{"limiter": {"api"}, "key": {"k"}, "cost": {string(rune('0' + cost))}}
		req, _ := http.NewRequest("GET", s.url+"/v1/decide?"+q.Encode(), nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var d decisionJSON
		json.NewDecoder(resp.Body).Decode(&d)
		return resp.StatusCode, d
	}
	for _, h := range []string{"evil.example" + port, "evil.example", "localhost.evil.example" + port, "edge.internal.evil.example"} {
		if st, _ := decide(h, 9); st != http.StatusForbidden {
			t.Errorf("a decision with Host %s: %d, want 403", h, st)
		}
	}
	for i, h := range []string{"127.0.0.1" + port, "localhost" + port, "[::1]" + port, "edge.internal" + port, "Edge.Internal."} {
		if st, d := decide(h, 1); st != 200 || d.Remaining != int64(100-1-i) {
			t.Errorf("a decision with Host %s: %d %+v, want 200 and %d remaining (nothing spent by the refused ones)", h, st, d, 100-1-i)
		}
	}
}
