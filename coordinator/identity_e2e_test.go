package coordinator_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/coordinator"
	"github.com/edgelimit/edgelimit/coordinator/dashboard"
	"github.com/edgelimit/edgelimit/edge/host"
	"github.com/edgelimit/edgelimit/edge/syncloop"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestForgedBatchesForceNoReincarnation is issue 21's reincarnation probe
// end to end: a real edge host (the module under wazero, its sync loops)
// syncs with token "edge"; a client holding the same token forges batches
// under the host's isolate ids, with the sequence numbers that used to
// force a new incarnation (hw+1 and beyond, seq 1). Every forged batch is
// refused, the host's isolates keep their ids (no "~" incarnation appears
// at the coordinator), every request they admitted is counted, and the
// dashboard shows no refusal against them.
func TestForgedBatchesForceNoReincarnation(t *testing.T) {
	cfg := wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
		{Name: "api", Algorithm: wire.FixedWindow, Limit: 1_000_000, Period: int64(time.Hour), Mode: wire.Approximate}}}
	const token = "edge"
	c, err := coordinator.Open(coordinator.Options{InMemory: true, Config: cfg, Tokens: []string{token}})
	if err != nil {
		t.Fatal(err)
	}
	curl := serveLoopback(t, c)
	_, hurl := serveEdge(t, host.Options{Config: cfg, Isolates: 2, Coordinator: curl,
		Token: token, IDPrefix: "e", Sync: syncloop.Options{Interval: 20 * time.Millisecond}})
	admitted := 0
	decide := func(n int) {
		for range n {
			resp, err := http.Get(hurl + "/v1/decide?limiter=api&key=k")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode == 200 {
				admitted++
			}
		}
	}
	count := func() int64 {
		ks, err := c.KeyState(context.Background(), "api", "k")
		if err != nil {
			t.Fatal(err)
		}
		return ks.Count
	}
	waitCount := func(want int64) {
		for deadline := time.Now().Add(10 * time.Second); count() != want; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("coordinator count %d, want %d", count(), want)
			}
		}
	}
	decide(20)
	waitCount(int64(admitted))
	forge := func(iso string, seq int64) int {
		now := time.Now().UnixNano()
		b := wire.Batch{Version: wire.Version, Isolate: iso, Seq: seq, At: now,
			Entries: []wire.Delta{{Limiter: "api", Key: "k", Window: now / int64(time.Hour), Delta: 1000}}}
		return postBatch(t, curl, token, &b)
	}
	for _, iso := range []string{"e-0", "e-1"} {
		for seq := int64(1); seq <= 200; seq++ { // every number the real isolate may be at, and past it
			if st := forge(iso, seq); st != 409 {
				t.Fatalf("forged batch %s/%d: %d, want 409", iso, seq, st)
			}
		}
		if st := forge(iso, 1<<40); st != 409 {
			t.Fatalf("forged batch %s/2^40: %d, want 409", iso, st)
		}
	}
	decide(20)
	waitCount(int64(admitted))
	req, _ := http.NewRequest("GET", curl+"/v1/isolates", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var iv dashboard.IsolatesView
	if err := json.NewDecoder(resp.Body).Decode(&iv); err != nil {
		t.Fatal(err)
	}
	for _, is := range iv.Isolates {
		if strings.Contains(is.ID, "~") {
			t.Fatalf("isolate %s: a new incarnation appeared after the forged batches (%+v)", is.ID, iv.Isolates)
		}
		// The forged batches are not the isolate's: the dashboard shows
		// none of their refusals against it.
		if is.Errors != 0 || is.LastError != "" || is.State == "failing" {
			t.Fatalf("isolate %s shows the forged batches' refusals: state %q, %d errors, last %q", is.ID, is.State, is.Errors, is.LastError)
		}
	}
	if len(iv.Isolates) != 2 {
		t.Fatalf("isolates %+v, want e-0 and e-1 only", iv.Isolates)
	}
}
