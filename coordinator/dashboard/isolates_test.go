package dashboard

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

func TestHostOf(t *testing.T) {
	for id, want := range map[string]string{
		"edge-h1-4242-1700000000000000000-3":               "edge-h1-4242-1700000000000000000", // Go host, isolate 3
		"edge-h1-4242-1700000000000000000-12~0a1b2c3d4e5f": "edge-h1-4242-1700000000000000000", // reincarnated
		"ui-edge-1/r2":         "ui-edge",         // restarted after a trap
		"js-0a1b2c3d4e5f":      "js-0a1b2c3d4e5f", // JS package: one isolate per id
		"js-123456789012":      "js-123456789012", // 12 digits are no isolate index
		"js-0a1b~0123456789ab": "js-0a1b",         // JS reincarnation
		"worker~zz":            "worker~zz",       // not an incarnation suffix
		"solo":                 "solo",
		"-5":                   "-5",
	} {
		if got := HostOf(id); got != want {
			t.Errorf("HostOf(%q) = %q, want %q", id, got, want)
		}
	}
}

// TestIsolateStates: isolates of two edge hosts sync every 100 ms; one
// isolate of host A stops syncing (idle once silent for 10 s: its host's
// other isolate is active), host B stops altogether (silent: dead or
// idle), one isolate stops gracefully (stopped) and one is refused
// (failing). The cadence is measured, not assumed: an isolate syncing
// every 5 s is still active 12 s after its last sync, silent after 15.
func TestIsolateStates(t *testing.T) {
	d := New(testConfig(), t0)
	const ms = int64(time.Millisecond)
	now := int64(t0)
	for range 10 {
		for _, id := range []string{"A-0", "A-1", "B-0", "B-1", "C-0", "D-0"} {
			d.Synced("", id, true, nil, now)
		}
		now += 100 * ms
	}
	d.Ended("", "C-0")
	d.Synced("", "D-0", true, errors.New("seq gap"), now)
	for range 5 {
		d.Synced("", "S-0", true, nil, now)
		now += 5000 * ms
	}
	now -= 5000 * ms
	for range 120 { // A-0 on schedule for 12 s more
		now += 100 * ms
		d.Synced("", "A-0", true, nil, now)
	}
	states := func() map[string]IsolateView {
		out := map[string]IsolateView{}
		d.mu.Lock()
		hosts := d.liveHosts(now)
		for _, is := range d.isos {
			h := HostOf(is.id)
			out[is.id] = IsolateView{Host: h, State: is.state(now, hosts[is.scope+"\x00"+h] && !is.syncing(now)),
				CadenceMS: is.cadence() / ms}
		}
		d.mu.Unlock()
		return out
	}
	want := map[string]string{"A-0": StateActive, "A-1": StateIdle, "B-0": StateSilent, "B-1": StateSilent,
		"C-0": StateStopped, "D-0": StateFailing, "S-0": StateActive}
	got := states()
	for id, w := range want {
		if got[id].State != w {
			t.Errorf("%s: %s (cadence %d ms), want %s", id, got[id].State, got[id].CadenceMS, w)
		}
	}
	if got["A-0"].CadenceMS != 100 || got["S-0"].CadenceMS != 5000 || got["A-1"].Host != "A" {
		t.Errorf("cadences A-0 %d ms, S-0 %d ms, host of A-1 %q; want 100, 5000, A", got["A-0"].CadenceMS,
			got["S-0"].CadenceMS, got["A-1"].Host)
	}
	// Past 3 of its 5 s gaps, S-0 is silent too.
	now += 3500 * ms
	if s := states()["S-0"].State; s != StateSilent {
		t.Errorf("S-0 15.5 s after its last sync (cadence 5 s): %s, want silent", s)
	}
}

// TestKeyUpstreamShown: a key's pause and open circuit, as the reply
// says, show on its row with the time left; a later reply without
// upstream state for the key clears them.
func TestKeyUpstreamShown(t *testing.T) {
	d := New(testConfig(), t0)
	views := []wire.View{{Limiter: "fw", Key: "p", Window: 1000, Count: 1}, {Limiter: "fw", Key: "c", Window: 1000, Count: 1}}
	d.Applied(&wire.Batch{}, &wire.Reply{Entries: views, Upstream: []wire.UpView{
		{Limiter: "fw", Key: "p", Pause: 30 * sec},
		{Limiter: "fw", Key: "c", Circuit: wire.CircuitOpen, Open: 2 * sec}}}, t0)
	kv := map[string]KeyView{}
	for _, e := range d.lims["fw"].top.entries() {
		kv[e.key] = keyView(d.lims["fw"].cfg, &e, t0+sec)
	}
	if kv["p"].PauseLeftMS != 29000 || kv["p"].Circuit != "closed" || kv["c"].Circuit != "open" || kv["c"].CircuitOpenMS != 1000 {
		t.Fatalf("rows %+v, want p paused 29 s, c open 1 s", kv)
	}
	d.Applied(&wire.Batch{}, &wire.Reply{Entries: views[:1]}, t0+2*sec)
	for _, e := range d.lims["fw"].top.entries() {
		if e.key == "p" {
			if v := keyView(d.lims["fw"].cfg, &e, t0+2*sec); v.PauseLeftMS != 0 {
				t.Fatalf("p still paused %d ms after a reply without its pause", v.PauseLeftMS)
			}
		}
	}
}

// TestHeartbeatTellsIdleFromDead: two hosts of one isolate each stop
// having traffic; one keeps sending heartbeats (empty batches every 10 s,
// the Go edge host's default) and is idle, the other stops syncing (its
// process died) and is silent once 3 of its cadences have passed.
func TestHeartbeatTellsIdleFromDead(t *testing.T) {
	d := New(testConfig(), t0)
	now := int64(t0)
	for range 20 { // traffic every 100 ms
		d.Synced("", "idle-0", true, nil, now)
		d.Synced("", "dead-0", true, nil, now)
		now += int64(100 * time.Millisecond)
	}
	for i := range 9 { // 90 s of heartbeats; dead-0 stops after 20 s
		now += int64(10 * time.Second)
		d.Synced("", "idle-0", false, nil, now)
		if i < 2 {
			d.Synced("", "dead-0", false, nil, now)
		}
	}
	now += int64(5 * time.Second)
	d.mu.Lock()
	defer d.mu.Unlock()
	hosts := d.liveHosts(now)
	for id, want := range map[string]string{"idle-0": StateIdle, "dead-0": StateSilent} {
		is := d.isos[id]
		if got := is.state(now, hosts["\x00"+HostOf(id)] && !is.syncing(now)); got != want {
			t.Errorf("%s: %s (cadence %d ms), want %s", id, got, is.cadence()/1e6, want)
		}
	}
}

// TestIsolateFloodKeepsOtherTokens: a client of one token makes up 30,000
// isolate ids, each syncing once (or refused); the 100 isolates of another
// token, which synced before all of them, stay listed (it evicted them all
// before), the dashboard keeps at most dashIsolates, and the flooder's
// newest ids are the ones kept.
func TestIsolateFloodKeepsOtherTokens(t *testing.T) {
	d := New(testConfig(), t0)
	now := int64(t0)
	for i := range 100 {
		now++
		d.Synced("a/", fmt.Sprintf("edge-%d", i), true, nil, now)
	}
	for i := range 30000 {
		now++
		var err error
		if i%2 == 0 {
			err = errors.New("seq gap")
		}
		d.Synced("b/", fmt.Sprintf("made-up-%d", i), false, err, now)
		if len(d.isos) > dashIsolates {
			t.Fatalf("%d isolates kept after %d made up, want at most %d", len(d.isos), i+1, dashIsolates)
		}
	}
	kept := map[string]int{}
	for _, is := range d.isos {
		kept[is.scope]++
	}
	if kept["a/"] != 100 || kept["b/"] != d.scopes["b/"] || d.scopes["a/"] != 100 {
		t.Fatalf("kept %v (counted %v), want token a's 100 isolates and the counts to match", kept, d.scopes)
	}
	if d.isos["b/made-up-29999"] == nil {
		t.Fatal("the newest made-up isolate was forgotten")
	}
}

// BenchmarkIsolateFlood: the cost of one new isolate id at the bound
// (dashIsolates remembered).
func BenchmarkIsolateFlood(b *testing.B) {
	d := New(testConfig(), t0)
	for i := range dashIsolates {
		d.Synced("a/", fmt.Sprintf("edge-%d", i), true, nil, int64(i))
	}
	b.ResetTimer()
	for i := range b.N {
		d.Synced("b/", fmt.Sprintf("made-up-%d", i), false, nil, int64(dashIsolates+i))
	}
}
