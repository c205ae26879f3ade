package coordinator

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/edgelimit/edgelimit/coordinator/dashboard"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// apiGet GETs path with token and decodes the JSON body into v (when 200).
func apiGet(t *testing.T, url, token string, v any) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == 200 && v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("GET %s: %v: %s", url, err, b)
		}
	}
	return resp.StatusCode, b
}

func TestDashboardAPI(t *testing.T) {
	_, clk, srv := newTestServer(t, func(o *Options) { o.Tokens = []string{"edge-1", "edge-2"} })
	w := clk.now() / sec
	post := func(token string, b *wire.Batch) int {
		st, out := httpPost(t, srv, MsgpackContentType, b.AppendMsg(nil), map[string]string{"Authorization": "Bearer " + token})
		if st != 200 && st != 409 {
			t.Fatalf("sync: %d %s", st, out)
		}
		return st
	}
	post("edge-1", batch("iso-a", 1, clk.now(),
		wire.Delta{Limiter: "fw", Key: "hot", Window: w, Delta: 60, Demand: 70},
		wire.Delta{Limiter: "fw", Key: "cold", Window: w, Delta: 5, Demand: 5}))
	post("edge-2", batch("iso-b", 1, clk.now(),
		wire.Delta{Limiter: "fw", Key: "hot", Window: w, Delta: 25, Demand: 30}))
	// A retry of the same batch is not counted again; a gap is an error of iso-b.
	post("edge-2", batch("iso-b", 1, clk.now(),
		wire.Delta{Limiter: "fw", Key: "hot", Window: w, Delta: 25, Demand: 30}))
	if st := post("edge-2", batch("iso-b", 5, clk.now(), wire.Delta{Limiter: "fw", Key: "hot", Window: w, Delta: 1})); st != 409 {
		t.Fatalf("seq gap answered %d", st)
	}
	// A batch refused as invalid counts as an error of its isolate.
	if st, out := httpPost(t, srv, MsgpackContentType, batch("iso-c", 1, 1<<62,
		wire.Delta{Limiter: "fw", Key: "k", Window: w, Delta: 1}).AppendMsg(nil),
		map[string]string{"Authorization": "Bearer edge-1"}); st != 400 {
		t.Fatalf("a time far ahead: %d %s", st, out)
	}
	clk.add(sec)

	var ls dashboard.LimitersView
	if st, b := apiGet(t, srv.URL+"/v1/limiters", "edge-1", &ls); st != 200 {
		t.Fatalf("GET /v1/limiters: %d %s", st, b)
	}
	if len(ls.Limiters) != len(testConfig().Limiters) || ls.Limiters[0].Name != "fw" {
		t.Fatalf("limiters: %+v", ls.Limiters)
	}
	fw := ls.Limiters[0]
	if fw.Admitted != 90 || fw.Denied != 15 || fw.Algorithm != wire.FixedWindow || fw.Mode != wire.Approximate ||
		fw.Period != "1s" || fw.Limit != 100 {
		t.Fatalf("fw: %+v (want admitted 90, denied 15)", fw)
	}
	if fw.AdmittedPS != 9 || fw.DeniedPS != 1.5 {
		t.Fatalf("fw rates over 10 s: %v admitted/s, %v denied/s; want 9 and 1.5", fw.AdmittedPS, fw.DeniedPS)
	}
	if !ls.Coordinator.StoreHealthy || ls.Coordinator.Commits == 0 {
		t.Fatalf("coordinator: %+v", ls.Coordinator)
	}

	clk.add(-sec) // back into the window the keys were counted in
	var tk dashboard.TopKeysView
	if st, b := apiGet(t, srv.URL+"/v1/limiters/fw/keys?top=1", "edge-2", &tk); st != 200 {
		t.Fatalf("GET keys: %d %s", st, b)
	}
	if len(tk.Keys) != 1 {
		t.Fatalf("top=1 gave %d keys", len(tk.Keys))
	}
	if k := tk.Keys[0]; k.Key != "hot" || k.Count != 85 || k.Limit != 100 || k.Remaining != 15 || !k.NearLimit ||
		k.Isolates != 2 || k.ResetMS <= 0 || k.ResetMS > 1000 {
		t.Fatalf("hot: %+v", k)
	}
	apiGet(t, srv.URL+"/v1/limiters/fw/keys", "edge-2", &tk)
	if len(tk.Keys) != 2 || tk.Keys[1].Key != "cold" || tk.Keys[1].NearLimit || tk.Keys[1].Count != 5 {
		t.Fatalf("all keys: %+v", tk.Keys)
	}

	for _, tc := range []struct{ path, field string }{
		{"/v1/limiters/fw/keys?top=0", "top"}, {"/v1/limiters/fw/keys?top=x", "top"},
		{"/v1/limiters/fw/keys?top=101", "top"}, {"/v1/isolates?within=-1s", "within"},
		{"/v1/isolates?within=soon", "within"}} {
		st, b := apiGet(t, srv.URL+tc.path, "edge-1", nil)
		if p := decodeProblem(t, b); st != 400 || p.Field != tc.field {
			t.Fatalf("%s: %d %s", tc.path, st, b)
		}
	}
	if st, b := apiGet(t, srv.URL+"/v1/limiters/nope/keys", "edge-1", nil); st != 404 || decodeProblem(t, b).Field != "name" {
		t.Fatalf("unknown limiter: %d %s", st, b)
	}
	for _, p := range []string{"/v1/limiters", "/v1/limiters/fw/keys", "/v1/isolates"} {
		if st, _ := apiGet(t, srv.URL+p, "", nil); st != 401 {
			t.Fatalf("%s without a token: %d", p, st)
		}
	}

	// Each token sees its own isolates.
	var is dashboard.IsolatesView
	apiGet(t, srv.URL+"/v1/isolates", "edge-1", &is)
	if len(is.Isolates) != 2 || is.Isolates[0].ID != "iso-a" || is.Isolates[0].Syncs != 1 || is.Isolates[0].Errors != 0 ||
		is.Isolates[0].LastSyncAgeMS != 0 {
		t.Fatalf("edge-1 isolates: %+v", is.Isolates)
	}
	if c := is.Isolates[1]; c.ID != "iso-c" || c.Syncs != 0 || c.Errors != 1 || c.LastSyncAgeMS != -1 ||
		!strings.Contains(c.LastError, "ahead") {
		t.Fatalf("edge-1 refused isolate: %+v", c)
	}
	apiGet(t, srv.URL+"/v1/isolates", "edge-2", &is)
	if len(is.Isolates) != 1 || is.Isolates[0].ID != "iso-b" || is.Isolates[0].Syncs != 2 || is.Isolates[0].Errors != 1 ||
		!strings.Contains(is.Isolates[0].LastError, "seq") {
		t.Fatalf("edge-2 isolates: %+v", is.Isolates)
	}
	clk.add(11 * 60 * sec)
	apiGet(t, srv.URL+"/v1/isolates", "edge-2", &is)
	if len(is.Isolates) != 0 {
		t.Fatalf("isolates silent for 11 min still listed: %+v", is.Isolates)
	}
	apiGet(t, srv.URL+"/v1/isolates?within=1h", "edge-2", &is)
	if len(is.Isolates) != 1 {
		t.Fatalf("within=1h: %+v", is.Isolates)
	}
	clk.add(-11 * 60 * sec)

	// Reset drops the key from the busiest keys.
	req, _ := http.NewRequest("DELETE", srv.URL+"/v1/limiters/fw/keys/hot", nil)
	req.Header.Set("Authorization", "Bearer edge-1")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 204 {
		t.Fatalf("DELETE: %v %v", resp, err)
	}
	apiGet(t, srv.URL+"/v1/limiters/fw/keys", "edge-1", &tk)
	if len(tk.Keys) != 1 || tk.Keys[0].Key != "cold" {
		t.Fatalf("after reset: %+v", tk.Keys)
	}

	// The page needs no token (it holds no data) and is self-contained.
	resp, err := http.Get(srv.URL + "/ui")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(string(page), "/v1/limiters") || strings.Contains(string(page), "https://") {
		t.Fatalf("/ui: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

// TestDashboardBoundedManyKeys syncs 5,000 distinct keys (one busier than
// the rest) through the coordinator: the busiest-keys set stays at
// dashboard.DashboardTopKeys, and the busy key ranks first.
func TestDashboardBoundedManyKeys(t *testing.T) {
	c, clk := newTestCoordinator(t, t0, nil)
	w := clk.now() / sec
	seq := int64(0)
	for chunk := 0; chunk < 5; chunk++ {
		es := make([]wire.Delta, 0, 1001)
		for i := range 1000 {
			es = append(es, wire.Delta{Limiter: "fw", Key: fmt.Sprint("k", chunk*1000+i), Window: w, Delta: int64(1 + i%3)})
		}
		es = append(es, wire.Delta{Limiter: "fw", Key: "busy", Window: w, Delta: 10, Demand: 12})
		seq++
		mustSync(t, c, batch("iso", seq, clk.now(), es...))
	}
	srv := newServerFor(t, c)
	var tk dashboard.TopKeysView
	apiGet(t, srv+"/v1/limiters/fw/keys?top=100", "", &tk)
	if len(tk.Keys) != dashboard.DashboardTopKeys || tk.Keys[0].Key != "busy" || tk.Keys[0].Count != 50 {
		t.Fatalf("%d keys, first %+v", len(tk.Keys), tk.Keys[0])
	}
	for _, k := range tk.Keys[1:] {
		if k.Count != 3 {
			t.Fatalf("a key of count %d kept among the busiest (all kept should have 3): %+v", k.Count, k)
		}
	}
	var ls dashboard.LimitersView
	apiGet(t, srv+"/v1/limiters", "", &ls)
	if ls.Limiters[0].TrackedKeys != dashboard.DashboardTopKeys || ls.Limiters[0].Denied != 10 {
		t.Fatalf("fw: %+v", ls.Limiters[0])
	}
}

func newServerFor(t *testing.T, c *Coordinator) string {
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(srv.Close)
	return srv.URL
}
