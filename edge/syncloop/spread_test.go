package syncloop

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// preferredVectors are Preferred's answers the JavaScript package's test
// (edge/js/test/spread.test.js) checks too: both pick the same coordinator.
var preferredVectors = []struct {
	id   string
	n    int
	want int
}{
	{"", 3, 0}, {"a", 1, 0}, {"a", 2, 0}, {"edge-0", 2, 1}, {"edge-1", 2, 0}, {"edge-2", 3, 0},
	{"js-0123456789ab", 5, 4}, {"isolate-7", 3, 0},
}

// TestPreferredVectors pins Preferred (FNV-1a 64 modulo n).
func TestPreferredVectors(t *testing.T) {
	for _, v := range preferredVectors {
		if got := Preferred(v.id, v.n); got != v.want {
			t.Errorf("Preferred(%q, %d) = %d, want %d", v.id, v.n, got, v.want)
		}
	}
}

// TestHTTPTransportSpreadsAndReturns: isolates listing the same two
// coordinators spread their syncs over both by their ids; when one
// answers 503 its isolates move to the other, and they return to it
// (after ReturnAfter) once it answers again.
func TestHTTPTransportSpreadsAndReturns(t *testing.T) {
	var aDown atomic.Bool
	var hits [2]atomic.Int64
	a := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if aDown.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		hits[0].Add(1)
		w.Write([]byte("a"))
	}))
	defer a.Close()
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits[1].Add(1)
		w.Write([]byte("b"))
	}))
	defer b.Close()
	urls := []string{a.URL, b.URL}
	const isolates = 16
	var trs []*HTTPTransport
	perPref := [2]int{}
	for i := 0; i < isolates; i++ {
		id := fmt.Sprintf("edge-%d", i)
		trs = append(trs, &HTTPTransport{URL: a.URL + "," + b.URL, ID: id, ReturnAfter: 500 * time.Millisecond})
		perPref[Preferred(id, 2)]++
	}
	if perPref[0] == 0 || perPref[1] == 0 {
		t.Fatalf("16 ids all prefer one coordinator: %v", perPref)
	}
	syncAll := func() {
		t.Helper()
		for i, tr := range trs {
			if _, err := tr.Sync(context.Background(), []byte("batch"), nil); err != nil {
				t.Fatalf("isolate %d: %v", i, err)
			}
		}
	}
	syncAll()
	if hits[0].Load() != int64(perPref[0]) || hits[1].Load() != int64(perPref[1]) {
		t.Fatalf("hits a=%d b=%d, want %v", hits[0].Load(), hits[1].Load(), perPref)
	}
	for i, tr := range trs {
		if want := urls[Preferred(tr.ID, 2)]; tr.Current() != want || tr.Failovers() != 0 {
			t.Fatalf("isolate %d uses %s (failovers %d), want %s", i, tr.Current(), tr.Failovers(), want)
		}
	}
	// a fails: its isolates move to b (one failover each) and stay there.
	aDown.Store(true)
	syncAll()
	syncAll()
	for i, tr := range trs {
		wantF := int64(0)
		if Preferred(tr.ID, 2) == 0 {
			wantF = 1
		}
		if tr.Current() != b.URL || tr.Failovers() != wantF {
			t.Fatalf("a down: isolate %d uses %s, failovers %d (want %d)", i, tr.Current(), tr.Failovers(), wantF)
		}
	}
	// Still down past ReturnAfter: the try fails, no failover is counted.
	// (Waits of half a second: sixteen syncs on a loaded machine took
	// longer than the 100 ms these were, and an isolate's wait ran out
	// before the next round.)
	time.Sleep(600 * time.Millisecond)
	syncAll()
	for i, tr := range trs {
		if tr.Current() != b.URL || tr.Returns() != 0 || tr.Failovers() > 1 {
			t.Fatalf("a still down: isolate %d uses %s, returns %d, failovers %d", i, tr.Current(), tr.Returns(), tr.Failovers())
		}
	}
	// a recovers: past the doubled wait (1 s), its isolates return.
	aDown.Store(false)
	syncAll()
	if n := hits[0].Load(); n != int64(perPref[0]) {
		t.Fatalf("returned before the wait: a hits %d", n)
	}
	time.Sleep(1100 * time.Millisecond)
	syncAll()
	for i, tr := range trs {
		want, wantR := urls[Preferred(tr.ID, 2)], int64(0)
		if want == a.URL {
			wantR = 1
		}
		if tr.Current() != want || tr.Returns() != wantR {
			t.Fatalf("a back: isolate %d uses %s, returns %d; want %s, %d", i, tr.Current(), tr.Returns(), want, wantR)
		}
	}
	if n := hits[0].Load(); n != int64(2*perPref[0]) {
		t.Fatalf("a hits %d after the return, want %d", n, 2*perPref[0])
	}
}

// hungAndLive starts two coordinators for t: one that never answers (until
// the client gives up) and one that answers "ok".
func hungAndLive(t *testing.T) (hung, live *httptest.Server) {
	stop := make(chan struct{})
	hung = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-stop:
		case <-r.Context().Done():
		}
	}))
	live = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	t.Cleanup(func() {
		close(stop)
		hung.Close()
		live.Close()
	})
	return hung, live
}

// TestHTTPTransportLeavesHung: a coordinator that never answers is left
// after one client timeout, in the same sync.
func TestHTTPTransportLeavesHung(t *testing.T) {
	hung, live := hungAndLive(t)
	tr := &HTTPTransport{URL: hung.URL + "," + live.URL, Client: &http.Client{Timeout: 100 * time.Millisecond}}
	start := time.Now()
	out, err := tr.Sync(context.Background(), []byte("batch"), nil)
	if el := time.Since(start); err != nil || string(out) != "ok" || el > time.Second || tr.Current() != live.URL {
		t.Fatalf("%q %v after %v, in use %s", out, err, el, tr.Current())
	}
}

// TestHTTPTransportLeavesAbandoned: an attempt the caller ends before the
// coordinator answers (the edge host abandons an attempt in flight for a
// second, shorter than the sync timeout) makes the next attempt start
// with the next coordinator. Before, every attempt went to the same hung
// one: edges under load never left a coordinator stopped with SIGSTOP.
func TestHTTPTransportLeavesAbandoned(t *testing.T) {
	hung, live := hungAndLive(t)
	tr := &HTTPTransport{URL: hung.URL + "," + live.URL, Client: &http.Client{Timeout: time.Minute}}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond) // abandoned
	_, err := tr.Sync(ctx, []byte("batch"), nil)
	cancel()
	if err == nil || tr.Current() != live.URL || tr.Failovers() != 1 {
		t.Fatalf("the abandoned attempt: %v, in use %s, %d failovers; want an error, the live one next, 1 failover", err, tr.Current(), tr.Failovers())
	}
	out, err := tr.Sync(context.Background(), []byte("batch"), nil)
	if err != nil || string(out) != "ok" {
		t.Fatalf("the next attempt: %q %v", out, err)
	}
}

// TestHTTPTransportReturnTryBounded: while away from a preferred
// coordinator that hangs, a return try waits ReturnTimeout, not the
// client's timeout, and the same sync goes to the one in use.
func TestHTTPTransportReturnTryBounded(t *testing.T) {
	hung, live := hungAndLive(t)
	tr := &HTTPTransport{URL: hung.URL + "," + live.URL, Client: &http.Client{Timeout: 300 * time.Millisecond},
		ReturnAfter: time.Millisecond, ReturnTimeout: 50 * time.Millisecond} // no ID: it prefers the first URL
	if out, err := tr.Sync(context.Background(), []byte("batch"), nil); err != nil || string(out) != "ok" || tr.Current() != live.URL {
		t.Fatalf("first sync: %q %v, in use %s", out, err, tr.Current())
	}
	time.Sleep(5 * time.Millisecond) // a return try is due
	start := time.Now()
	out, err := tr.Sync(context.Background(), []byte("batch"), nil)
	if el := time.Since(start); err != nil || string(out) != "ok" || el >= 250*time.Millisecond {
		t.Fatalf("a sync with a return try to the hung one: %q %v after %v; want ok within the return timeout (50 ms), not the client's (300 ms)", out, err, el)
	}
}
