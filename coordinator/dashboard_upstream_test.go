package coordinator

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/edgelimit/edgelimit/coordinator/dashboard"
	"github.com/edgelimit/edgelimit/coordinator/history"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestDashboardShowsUpstreamPause: an isolate reports an upstream's 30 s
// pause of a key; the dashboard's row of the key shows the pause and its
// time left, the other key none; the history counts the cost then denied
// on the paused key as paused, not denied.
func TestDashboardShowsUpstreamPause(t *testing.T) {
	c, clk := newTestCoordinator(t, t0, func(o *Options) { o.Config = upstreamConfig() })
	now := clk.now()
	mustSync(t, c, signalBatch("a1", 1, now, wire.Signal{Limiter: "up", Key: "hot", Pause: 30 * sec}))
	mustSync(t, c, batch("a2", 1, now, wire.Delta{Limiter: "up", Key: "hot", Window: now / sec, Delta: 0, Demand: 4},
		wire.Delta{Limiter: "up", Key: "calm", Window: now / sec, Delta: 1, Demand: 3}))
	clk.add(sec)
	rec := httptest.NewRecorder()
	c.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/v1/limiters/up/keys", nil))
	var tk dashboard.TopKeysView
	if err := json.NewDecoder(rec.Body).Decode(&tk); err != nil || rec.Code != 200 {
		t.Fatalf("GET keys: %d %v", rec.Code, err)
	}
	rows := map[string]dashboard.KeyView{}
	for _, k := range tk.Keys {
		rows[k.Key] = k
	}
	if p := rows["hot"].PauseLeftMS; p < 28000 || p > 29000 || rows["hot"].Circuit != "closed" {
		t.Fatalf("hot: pause left %d ms, circuit %q; want about 29 s, closed", p, rows["hot"].Circuit)
	}
	if rows["calm"].PauseLeftMS != 0 || rows["calm"].Key != "calm" {
		t.Fatalf("calm: %+v, want no pause", rows["calm"])
	}
	for key, want := range map[string]history.Counts{"hot": {Admitted: 1, Paused: 4}, "calm": {Admitted: 1, Denied: 2}} {
		got, err := c.hist.rec.Read(history.Minute, history.Series{Limiter: "up", Key: key}, now/int64(60*sec), now/int64(60*sec)+1)
		if err != nil {
			t.Fatal(err)
		}
		if got[0] != want {
			t.Errorf("history of %s: %+v, want %+v", key, got[0], want)
		}
	}
}
