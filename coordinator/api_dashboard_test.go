package coordinator

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

func TestTopKeysKeepsTheBusiest(t *testing.T) {
	tk := newTopKeys(3)
	for i := range 10 {
		tk.observe(&wire.View{Key: fmt.Sprint("k", i), Window: 5, Count: int64(i)}, 0)
	}
	if got := keysOf(tk); got != "k7,k8,k9" {
		t.Fatalf("kept %s, want the three busiest k7,k8,k9", got)
	}
	// A low key grows past the others: it comes back, the lowest goes.
	tk.observe(&wire.View{Key: "k0", Window: 5, Count: 50}, 0)
	if got := keysOf(tk); got != "k0,k8,k9" {
		t.Fatalf("after k0 grew: %s", got)
	}
	// An update of a kept key moves it, without duplicating it.
	tk.observe(&wire.View{Key: "k8", Window: 5, Count: 1}, 0)
	tk.observe(&wire.View{Key: "k7", Window: 5, Count: 2}, 0)
	if got := keysOf(tk); got != "k0,k7,k9" {
		t.Fatalf("after k8 dropped to 1: %s", got)
	}
	// Any key of a newer window outranks the old window's keys.
	tk.observe(&wire.View{Key: "new", Window: 6, Count: 1}, 0)
	if got := keysOf(tk); got != "k0,k9,new" {
		t.Fatalf("after a key of window 6: %s", got)
	}
	tk.forget("k9")
	tk.forget("absent")
	if got := keysOf(tk); got != "k0,new" || len(tk.idx) != 2 {
		t.Fatalf("after forget: %s (%d indexed)", got, len(tk.idx))
	}
}

func keysOf(tk *topKeys) string {
	var ks []string
	for _, e := range tk.entries() {
		ks = append(ks, e.key)
		if tk.idx[e.key] == nil || tk.h[tk.idx[e.key].pos].key != e.key {
			return "index broken at " + e.key
		}
	}
	sortStrings(ks)
	return strings.Join(ks, ",")
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

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
	if st, out := httpPost(t, srv, MsgpackContentType, batch("iso-c", 1, clk.now(),
		wire.Delta{Limiter: "nope", Key: "k", Window: w, Delta: 1}).AppendMsg(nil),
		map[string]string{"Authorization": "Bearer edge-1"}); st != 400 {
		t.Fatalf("unknown limiter: %d %s", st, out)
	}
	clk.add(sec)

	var ls LimitersView
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
	var tk TopKeysView
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
	var is IsolatesView
	apiGet(t, srv.URL+"/v1/isolates", "edge-1", &is)
	if len(is.Isolates) != 2 || is.Isolates[0].ID != "iso-a" || is.Isolates[0].Syncs != 1 || is.Isolates[0].Errors != 0 ||
		is.Isolates[0].LastSyncAgeMS != 0 {
		t.Fatalf("edge-1 isolates: %+v", is.Isolates)
	}
	if c := is.Isolates[1]; c.ID != "iso-c" || c.Syncs != 0 || c.Errors != 1 || c.LastSyncAgeMS != -1 ||
		!strings.Contains(c.LastError, "unknown limiter") {
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

func TestKeyViewAlgorithms(t *testing.T) {
	cfg := testConfig()
	now := 10*sec + sec/4 // a quarter into window 10
	// Sliding window: 40 now + 60 in the previous window weighted by 3/4 left.
	kv := keyView(&cfg.Limiters[1], &topEntry{key: "k", window: 10, count: 40, prev: 60}, now)
	if kv.Count != 85 || kv.Remaining != 15 || !kv.NearLimit || kv.ResetMS != 750 {
		t.Fatalf("sliding: %+v", kv)
	}
	// Fixed window: a view of the previous window counts nothing now.
	kv = keyView(&cfg.Limiters[0], &topEntry{key: "vip", window: 9, count: 900}, now)
	if kv.Count != 0 || kv.Limit != 1000 || kv.NearLimit {
		t.Fatalf("fixed, old window: %+v", kv)
	}
	// Token bucket 10/s, burst 20: a TAT 1.5 s ahead is 15 of 20 in use.
	kv = keyView(&cfg.Limiters[2], &topEntry{key: "k", tat: now + 3*sec/2}, now)
	if kv.Count != 15 || kv.Limit != 20 || kv.Remaining != 5 || kv.NearLimit || kv.ResetMS != 1500 {
		t.Fatalf("bucket: %+v", kv)
	}
}

// TestDashboardBoundedManyKeys syncs 5,000 distinct keys (one busier than
// the rest) through the coordinator: the busiest-keys set stays at
// DashboardTopKeys, and the busy key ranks first.
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
	var tk TopKeysView
	apiGet(t, srv+"/v1/limiters/fw/keys?top=100", "", &tk)
	if len(tk.Keys) != DashboardTopKeys || tk.Keys[0].Key != "busy" || tk.Keys[0].Count != 50 {
		t.Fatalf("%d keys, first %+v", len(tk.Keys), tk.Keys[0])
	}
	for _, k := range tk.Keys[1:] {
		if k.Count != 3 {
			t.Fatalf("a key of count %d kept among the busiest (all kept should have 3): %+v", k.Count, k)
		}
	}
	var ls LimitersView
	apiGet(t, srv+"/v1/limiters", "", &ls)
	if ls.Limiters[0].TrackedKeys != DashboardTopKeys || ls.Limiters[0].Denied != 10 {
		t.Fatalf("fw: %+v", ls.Limiters[0])
	}
}

func newServerFor(t *testing.T, c *Coordinator) string {
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(srv.Close)
	return srv.URL
}

// BenchmarkDashboardApplied measures what the dashboard adds to the merge
// of a batch of 1,000 entries over 100,000 keys.
func BenchmarkDashboardApplied(b *testing.B) {
	d := newDashboard(testConfig(), t0)
	const batches = 100
	bts, rps := make([]*wire.Batch, batches), make([]*wire.Reply, batches)
	for n := range batches {
		bts[n], rps[n] = &wire.Batch{Entries: make([]wire.Delta, 1000)}, &wire.Reply{Entries: make([]wire.View, 1000)}
		for i := range 1000 {
			k := fmt.Sprint("k", n*1000+i)
			bts[n].Entries[i] = wire.Delta{Limiter: "fw", Key: k, Window: 1000, Delta: 1, Demand: 2}
			rps[n].Entries[i] = wire.View{Limiter: "fw", Key: k, Window: 1000, Count: int64((n*31 + i*7) % 997)}
		}
	}
	n := 0
	for b.Loop() {
		d.applied(bts[n%batches], rps[n%batches], t0)
		n++
	}
}
