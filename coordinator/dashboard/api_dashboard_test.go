package dashboard

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

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

// BenchmarkDashboardApplied measures what the dashboard adds to the merge
// of a batch of 1,000 entries over 100,000 keys.
func BenchmarkDashboardApplied(b *testing.B) {
	d := New(testConfig(), t0)
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
		d.Applied(bts[n%batches], rps[n%batches], t0)
		n++
	}
}

const sec = int64(time.Second)

const t0 = 1000 * sec // window 1000 of a 1s period

// testConfig has one limiter of each kind.
func testConfig() wire.Config {
	return wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
		{Name: "fw", Algorithm: wire.FixedWindow, Limit: 100, Period: sec,
			Overrides: []wire.Override{{Key: "vip", Limit: 1000}}},
		{Name: "sw", Algorithm: wire.SlidingWindow, Limit: 100, Period: sec},
		{Name: "tb", Algorithm: wire.TokenBucket, Limit: 10, Period: sec, Burst: 20},
	}}
}

// fakeSource is a coordinator at a fixed time, without tokens.
type fakeSource struct {
	now   int64
	err   error
	fails []string
}

func (f *fakeSource) Now() int64                           { return f.now }
func (f *fakeSource) Healthy() error                       { return f.err }
func (f *fakeSource) CachedKeys() int                      { return 7 }
func (f *fakeSource) Scope(r *http.Request) (string, bool) { return "", false }
func (f *fakeSource) Fail(w http.ResponseWriter, status int, kind, field, title, detail string) {
	f.fails = append(f.fails, kind+":"+field)
	http.Error(w, detail, status)
}

// TestRoutesOverASource serves the API over a fake coordinator: what was
// fed (Applied, Synced, Forget, Committed) is what the API answers.
func TestRoutesOverASource(t *testing.T) {
	src := &fakeSource{now: t0}
	d := New(testConfig(), t0-5*sec)
	d.Applied(&wire.Batch{Entries: []wire.Delta{{Limiter: "fw", Key: "hot", Window: 1000, Delta: 60, Demand: 70},
		{Limiter: "fw", Key: "cold", Window: 1000, Delta: 5, Demand: 5}}},
		&wire.Reply{Entries: []wire.View{{Limiter: "fw", Key: "hot", Window: 1000, Count: 85, Isolates: 2},
			{Limiter: "fw", Key: "cold", Window: 1000, Count: 5}}}, t0)
	d.Synced("", "iso-a", true, nil, t0)
	d.Synced("", "iso-b", true, errors.New("seq gap"), t0)
	d.Committed(2 * time.Millisecond)
	d.Forget("fw", "cold")
	mux := http.NewServeMux()
	d.Routes(mux, src, nil)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	get := func(path string, v any) int {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode == 200 && v != nil {
			if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
				t.Fatal(err)
			}
		}
		return resp.StatusCode
	}
	var ls LimitersView
	if st := get("/v1/limiters", &ls); st != 200 || len(ls.Limiters) != 3 || ls.Limiters[0].Admitted != 65 ||
		ls.Limiters[0].Denied != 10 || !ls.Coordinator.StoreHealthy || ls.Coordinator.KeysCached != 7 ||
		ls.Coordinator.Commits != 1 || ls.Coordinator.CommitMaxMS != 2 || ls.Coordinator.UptimeSeconds != 5 {
		t.Fatalf("GET /v1/limiters: %d %+v", st, ls)
	}
	var tk TopKeysView
	if st := get("/v1/limiters/fw/keys", &tk); st != 200 || len(tk.Keys) != 1 || tk.Keys[0].Key != "hot" ||
		tk.Keys[0].Count != 85 || !tk.Keys[0].NearLimit {
		t.Fatalf("GET keys: %d %+v", st, tk)
	}
	var is IsolatesView
	if st := get("/v1/isolates", &is); st != 200 || len(is.Isolates) != 2 || is.Isolates[1].LastError != "seq gap" {
		t.Fatalf("GET /v1/isolates: %d %+v", st, is)
	}
	if get("/v1/limiters/nope/keys", nil) != 404 || get("/v1/limiters/fw/keys?top=0", nil) != 400 ||
		strings.Join(src.fails, ",") != "not_found:name,invalid:top" {
		t.Fatalf("errors: %v", src.fails)
	}
	if get("/ui", nil) != 200 {
		t.Fatal("GET /ui")
	}
}
