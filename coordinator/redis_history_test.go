package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/edgelimit/edgelimit/clock"
	"github.com/edgelimit/edgelimit/coordinator/dashboard"
	"github.com/edgelimit/edgelimit/coordinator/history"
	"github.com/edgelimit/edgelimit/coordinator/redisstore"
	"github.com/edgelimit/edgelimit/wasm/wire"
	"github.com/redis/go-redis/v9"
)

// TestRedisHistorySumsCoordinators: two coordinators over one Redis
// Cluster each merge their own isolates' batches on one key; once each has
// written its minute, the history either serves (its API) is the sum of
// both: the fleet's totals, which no coordinator's own counters show. A
// write retried with the same id adds nothing twice.
func TestRedisHistorySumsCoordinators(t *testing.T) {
	clk := &fakeClock{}
	clk.set(t0)
	openTestRedis(t, redisstore.Options{}).Close() // flush
	var cs []*Coordinator
	for range 2 {
		c, err := Open(Options{Store: openRedisNoFlush(t), Config: testConfig(), Clock: clock.Func(clk.now), GCInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		cs = append(cs, c)
	}
	mustSync(t, cs[0], batch("a", 1, t0, wire.Delta{Limiter: "fw", Key: "k", Window: 1000, Delta: 5, Demand: 5}))
	mustSync(t, cs[1], batch("b", 1, t0, wire.Delta{Limiter: "fw", Key: "k", Window: 1000, Delta: 7, Demand: 9}))
	mustSync(t, cs[1], batch("b", 2, t0, wire.Delta{Limiter: "fw", Key: "other", Window: 1000, Delta: 1, Demand: 1}))
	// The minute ends: each coordinator writes its own (the ticker's work).
	clk.add(int64(history.Minute.Width()))
	for _, c := range cs {
		c.hist.rec.Tick(clk.now())
		if err := c.hist.rec.Flush(clk.now()); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range cs {
		for _, q := range []struct {
			path        string
			admit, deny int64
		}{{"range=1h&key=k", 12, 2}, {"range=1h", 13, 2}, {"range=7d&key=k", 12, 2}} {
			rec := httptest.NewRecorder()
			c.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/v1/limiters/fw/history?"+q.path, nil))
			var h dashboard.HistoryView
			if err := json.NewDecoder(rec.Body).Decode(&h); err != nil || rec.Code != 200 {
				t.Fatalf("coordinator %d: %d %v", i, rec.Code, err)
			}
			if h.Totals.Admitted != q.admit || h.Totals.Denied != q.deny {
				t.Fatalf("coordinator %d, %s: totals %+v, want admitted %d denied %d (both coordinators)", i, q.path,
					h.Totals, q.admit, q.deny)
			}
		}
	}
	// The limiters' line: the fleet's last 24 h on either coordinator.
	for i, c := range cs {
		rec := httptest.NewRecorder()
		c.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/v1/limiters", nil))
		var ls dashboard.LimitersView
		if err := json.NewDecoder(rec.Body).Decode(&ls); err != nil || rec.Code != 200 {
			t.Fatalf("coordinator %d: GET /v1/limiters: %d %v", i, rec.Code, err)
		}
		if l := ls.Limiters[0]; l.Name != "fw" || l.Last24h == nil || l.Last24h.Admitted != 13 || l.Last24h.Denied != 2 {
			t.Fatalf("coordinator %d: limiter %+v, want last_24h admitted 13, denied 2", i, l)
		}
	}
	// A write retried with its id is applied once.
	hs := cs[0].store.(history.Store)
	pt := []history.Point{{Res: history.Minute, Bucket: history.Minute.Bucket(t0), Series: history.Series{Limiter: "fw", Key: "k"},
		Counts: history.Counts{Admitted: 100}}}
	for range 2 {
		if err := hs.AddHistory("retried-write", pt); err != nil {
			t.Fatal(err)
		}
	}
	got, err := hs.ReadHistory(history.Minute, history.Series{Limiter: "fw", Key: "k"}, pt[0].Bucket, pt[0].Bucket+1)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Admitted != 112 {
		t.Fatalf("after one write of 100 sent twice with one id: admitted %d, want 112", got[0].Admitted)
	}
	// The kept keys are in Redis for the next coordinator to start: k at
	// its last view (count 12).
	ks, err := hs.LoadKept("fw")
	if err != nil {
		t.Fatal(err)
	}
	var k12 bool
	for _, k := range ks {
		k12 = k12 || k.Key == "k" && k.Count == 12
	}
	if !k12 {
		t.Fatalf("kept keys in Redis %+v, want k at 12", ks)
	}
}

// BenchmarkRedisHistoryBytes measures what the history costs Redis in
// memory: 60 minutes of 1000 keys each admitted and denied (the minute
// and hour buckets, as the Recorder writes them) per op, reported as
// bytes of the masters' used_memory per series-minute.
func BenchmarkRedisHistoryBytes(b *testing.B) {
	rs := openTestRedis(b, redisstore.Options{})
	defer rs.Close()
	used := func() int64 {
		var n int64
		for _, a := range testCluster(b).Masters(context.Background()) {
			c := redis.NewClient(&redis.Options{Addr: a})
			info, err := c.Info(context.Background(), "memory").Result()
			c.Close()
			if err != nil {
				b.Fatal(err)
			}
			for _, line := range strings.Split(info, "\r\n") {
				if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
					x, _ := strconv.ParseInt(v, 10, 64)
					n += x
				}
			}
		}
		return n
	}
	before := used()
	const minutes, keys = 60, 1000
	runs := int64(0)
	for b.Loop() {
		base := 1000 + runs*minutes
		for m := range int64(minutes) {
			pts := make([]history.Point, 0, 2*keys)
			for i := range keys {
				p := history.Point{Res: history.Minute, Bucket: base + m, Series: history.Series{Limiter: "fw", Key: fmt.Sprintf("inbox-%04d", i)},
					Counts: history.Counts{Admitted: 17, Denied: 3}}
				pts = append(pts, p)
				p.Res, p.Bucket = history.Hour, (base+m)/60
				pts = append(pts, p)
			}
			if err := rs.AddHistory(fmt.Sprint("bench.", base+m), pts); err != nil {
				b.Fatal(err)
			}
		}
		runs++
	}
	after := used()
	b.ReportMetric(float64(after-before)/float64(runs*minutes*keys), "bytes/series-minute")
}
