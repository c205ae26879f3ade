package coordinator

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

func getJSON(t *testing.T, srv *httptest.Server, path, token string, v any) int {
	t.Helper()
	req, _ := http.NewRequest("GET", srv.URL+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == 200 && v != nil {
		if err := json.Unmarshal(body, v); err != nil {
			t.Fatalf("%s: %v in %s", path, err, body)
		}
	}
	return resp.StatusCode
}

// The dashboard's API over real HTTP: limiters with their totals, the
// busiest keys (kept as batches are applied) in order, the isolates of the
// caller's token only, and the page itself.
func TestDashboardAPI(t *testing.T) {
	_, clk, srv := newTestServer(t, func(o *Options) { o.Tokens = []string{"edge-a", "edge-b"} })
	send := func(token, iso string, seq int64, ds ...wire.Delta) {
		t.Helper()
		st, out := httpPost(t, srv, MsgpackContentType, batch(iso, seq, clk.now(), ds...).AppendMsg(nil),
			map[string]string{"Authorization": "Bearer " + token})
		if st != 200 {
			t.Fatalf("sync: %d %s", st, out)
		}
	}
	send("edge-a", "a-0", 1, wire.Delta{Limiter: "fw", Key: "hot", Window: 1000, Delta: 9, Demand: 12},
		wire.Delta{Limiter: "fw", Key: "warm", Window: 1000, Delta: 4, Demand: 4})
	send("edge-b", "b-0", 1, wire.Delta{Limiter: "fw", Key: "cold", Window: 1000, Delta: 1, Demand: 1},
		wire.Delta{Limiter: "fw", Key: "hot", Window: 1000, Delta: 1, Demand: 3})

	if st := getJSON(t, srv, "/v1/limiters", "", nil); st != 401 {
		t.Fatalf("limiters without a token: %d", st)
	}
	var lims []LimiterInfo
	if st := getJSON(t, srv, "/v1/limiters", "edge-a", &lims); st != 200 {
		t.Fatalf("limiters: %d", st)
	}
	var fw *LimiterInfo
	for i := range lims {
		if lims[i].Name == "fw" {
			fw = &lims[i]
		}
	}
	if fw == nil || fw.Admitted != 15 || fw.Denied != 5 || fw.Algorithm != wire.FixedWindow {
		t.Fatalf("fw: %+v in %+v", fw, lims)
	}
	var keys []KeyState
	if st := getJSON(t, srv, "/v1/limiters/fw/keys?top=2", "edge-b", &keys); st != 200 {
		t.Fatalf("top keys: %d", st)
	}
	if len(keys) != 2 || keys[0].Key != "hot" || keys[0].Count != 10 || keys[1].Key != "warm" || keys[1].Count != 4 {
		t.Fatalf("top 2: %+v", keys)
	}
	if st := getJSON(t, srv, "/v1/limiters/fw/keys?top=0", "edge-a", nil); st != 400 {
		t.Fatalf("top=0: %d", st)
	}
	if st := getJSON(t, srv, "/v1/limiters/nope/keys", "edge-a", nil); st != 404 {
		t.Fatalf("unknown limiter: %d", st)
	}
	var isos []IsolateInfo
	if st := getJSON(t, srv, "/v1/isolates", "edge-a", &isos); st != 200 {
		t.Fatalf("isolates: %d", st)
	}
	if len(isos) != 1 || isos[0].ID != "a-0" || isos[0].Seq != 1 {
		t.Fatalf("edge-a's isolates: %+v (another token's must not show)", isos)
	}
	// A reset leaves the busiest keys.
	req, _ := http.NewRequest("DELETE", srv.URL+"/v1/limiters/fw/keys/hot", nil)
	req.Header.Set("Authorization", "Bearer edge-a")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 204 {
		t.Fatalf("reset: %v %v", resp, err)
	}
	getJSON(t, srv, "/v1/limiters/fw/keys", "edge-a", &keys)
	if len(keys) != 2 || keys[0].Key != "warm" {
		t.Fatalf("after resetting hot: %+v", keys)
	}
	// The page is served without a token (its API calls carry one).
	resp, err := http.Get(srv.URL + "/ui")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), "/v1/limiters") || !strings.Contains(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("/ui: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}
