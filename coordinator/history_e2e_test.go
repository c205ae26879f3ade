package coordinator_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/coordinator"
	"github.com/edgelimit/edgelimit/coordinator/dashboard"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// getJSON GETs url+path into v and returns the status.
func getJSON(t *testing.T, url, path string, v any) int {
	t.Helper()
	resp, err := http.Get(url + path)
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

// TestHistorySurvivesRestart is issue 24's operator run: 50 inboxes under
// a daily quota of 200, inbox-03 at 198 (3 more asked and denied). After a
// graceful restart of the coordinator on the same Pebble directory, the
// page's API shows inbox-03 first among the busiest keys at 198/200
// before any isolate syncs again, finds all 50 inboxes by prefix (not
// only the 20 busiest), and has the history: the limiter's and
// inbox-03's admitted and denied cost over 1 h, 24 h (minutes) and 7 d
// (hours); cost synced after the restart adds to it before it is written.
func TestHistorySurvivesRestart(t *testing.T) {
	cfg := wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
		{Name: "inbox-daily", Algorithm: wire.FixedWindow, Limit: 200, Period: int64(24 * time.Hour)}}}
	dir := t.TempDir()
	open := func() (*coordinator.Coordinator, string, func()) {
		c, err := coordinator.Open(coordinator.Options{Dir: dir, Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		url, stop := serveUntil(t, c)
		return c, url, stop
	}
	_, url, stop := open()
	now := time.Now().UnixNano()
	win := now / int64(24*time.Hour)
	b := &wire.Batch{Version: wire.Version, Isolate: "edge-a-0", Secret: strings.Repeat("s", 32), Seq: 1, At: now}
	var admitted int64
	for i := range 50 {
		d := wire.Delta{Limiter: "inbox-daily", Key: fmt.Sprintf("inbox-%02d", i), Window: win, Delta: int64(i % 7), Demand: int64(i % 7)}
		if i == 3 {
			d.Delta, d.Demand = 198, 201
		}
		admitted += d.Delta
		b.Entries = append(b.Entries, d)
	}
	if st := postBatch(t, url, "", b); st != 200 {
		t.Fatalf("sync: %d", st)
	}
	stop() // a graceful stop writes the current minute

	_, url, _ = open()
	var top dashboard.TopKeysView
	if st := getJSON(t, url, "/v1/limiters/inbox-daily/keys?top=1", &top); st != 200 || len(top.Keys) != 1 ||
		top.Keys[0].Key != "inbox-03" || top.Keys[0].Count != 198 || top.Keys[0].Limit != 200 {
		t.Fatalf("busiest key after the restart: %d %+v, want inbox-03 at 198/200", st, top)
	}
	var ls dashboard.LimitersView
	if st := getJSON(t, url, "/v1/limiters", &ls); st != 200 || ls.Limiters[0].Admitted != 0 || ls.Limiters[0].Last24h == nil ||
		ls.Limiters[0].Last24h.Admitted != admitted || ls.Limiters[0].Last24h.Denied != 3 {
		t.Fatalf("limiters after the restart: %d %+v, want since start 0, last 24 h %d admitted, 3 denied", st, ls.Limiters, admitted)
	}
	var found dashboard.TopKeysView
	if st := getJSON(t, url, "/v1/limiters/inbox-daily/keys?prefix=inbox-&top=100", &found); st != 200 ||
		found.Matches != 50 || len(found.Keys) != 50 || found.Keys[0].Key != "inbox-00" || found.Keys[49].Key != "inbox-49" {
		t.Fatalf("search inbox-: %d, %d matches, %d keys", st, found.Matches, len(found.Keys))
	}
	if st := getJSON(t, url, "/v1/limiters/inbox-daily/keys?prefix=inbox-4&top=3", &found); st != 200 ||
		found.Matches != 10 || len(found.Keys) != 3 || found.Keys[0].Key != "inbox-40" {
		t.Fatalf("search inbox-4 top 3: %d %+v", st, found)
	}
	for _, q := range []struct {
		path        string
		points      int
		admit, deny int64
	}{
		{"range=1h", 60, admitted, 3},
		{"range=24h&key=inbox-03", 1440, 198, 3},
		{"range=7d&key_b64=aW5ib3gtMDM", 168, 198, 3}, // inbox-03
	} {
		var h dashboard.HistoryView
		if st := getJSON(t, url, "/v1/limiters/inbox-daily/history?"+q.path, &h); st != 200 || len(h.Points) != q.points ||
			h.Totals.Admitted != q.admit || h.Totals.Denied != q.deny || h.Totals.Paused != 0 {
			t.Fatalf("history %s after the restart: %d, %d points, totals %+v; want %d points, admitted %d, denied %d",
				q.path, st, len(h.Points), h.Totals, q.points, q.admit, q.deny)
		}
	}
	b2 := &wire.Batch{Version: wire.Version, Isolate: "edge-b-0", Secret: strings.Repeat("t", 32), Seq: 1, At: time.Now().UnixNano(),
		Entries: []wire.Delta{{Limiter: "inbox-daily", Key: "inbox-03", Window: win, Delta: 1, Demand: 1}}}
	if st := postBatch(t, url, "", b2); st != 200 {
		t.Fatalf("sync after the restart: %d", st)
	}
	var h dashboard.HistoryView
	if getJSON(t, url, "/v1/limiters/inbox-daily/history?range=1h&key=inbox-03", &h); h.Totals.Admitted != 199 {
		t.Fatalf("inbox-03 admitted %d in the last hour after one more, want 199", h.Totals.Admitted)
	}
	if st := getJSON(t, url, "/v1/limiters/inbox-daily/keys?prefix_b64=aW5ib3gtNA", &found); st != 200 || found.Matches != 10 {
		t.Fatalf("search by prefix_b64 of inbox-4: %d, %d matches, want 10", st, found.Matches)
	}
	var none dashboard.TopKeysView
	if st := getJSON(t, url, "/v1/limiters/inbox-daily/keys?prefix=zzz", &none); st != 200 || none.Matches != 0 || len(none.Keys) != 0 {
		t.Fatalf("search zzz: %d %+v, want no key", st, none)
	}
	for path, want := range map[string]int{
		"/v1/limiters/inbox-daily/history?range=2h":      400,
		"/v1/limiters/nope/history":                      404,
		"/v1/limiters/inbox-daily/history?key_b64=a+b/":  400,
		"/v1/limiters/inbox-daily/keys?prefix=x&top=101": 400,
		"/v1/limiters/inbox-daily/keys?prefix_b64=a+b":   400,
	} {
		if st := getJSON(t, url, path, nil); st != want {
			t.Errorf("GET %s: %d, want %d", path, st, want)
		}
	}
}
