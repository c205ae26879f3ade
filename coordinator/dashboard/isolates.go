package dashboard

import (
	"sort"
	"strings"
	"time"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// How the dashboard tells the isolates apart. Batches carry no sync
// interval, so the coordinator measures each isolate's cadence: the
// median of its last gapSamples gaps between two answered syncs (at
// least MinCadence; before two syncs, wire.DefaultSyncInterval, 100 ms).
// An isolate is:
//
//	active   its last sync, and its last batch with something in it, are
//	         within SilentAfter cadences (3), or MinSilence (10 s)
//	stopped  its last batch was its graceful stop (wire.Batch.End)
//	failing  its last attempt after its last answered sync was refused
//	idle     it syncs, but only heartbeats (empty batches: wire.Config.Heartbeat,
//	         the Go edge host's --heartbeat, 10 s) for that long; or it is silent
//	         while another isolate of its edge host is active: its process is
//	         alive, it had nothing to report
//	silent   no sync for more than SilentAfter cadences and no isolate of its
//	         host syncing: the host is dead, or idle without heartbeats (an
//	         isolate that sends none, as in Workers, which sync only during
//	         requests, sends nothing when idle: the coordinator cannot tell)
//
// The edge host of an isolate is its id without the incarnation suffix
// ('~' and hex: a reincarnation), the restart suffix ("/r" and digits: a
// module restart after a trap) and the isolate's index ('-' and up to 6
// digits): the Go edge host names its isolates PREFIX-0, PREFIX-1..., so
// its isolates share PREFIX; the JavaScript package runs one isolate per
// id, so its host is its id.

// Isolate states (IsolateView.State).
const (
	StateActive  = "active"
	StateStopped = "stopped"
	StateFailing = "failing"
	StateIdle    = "idle"
	StateSilent  = "silent"
)

// SilentAfter is how many of its cadences an isolate may go without an
// answered sync before it is no longer active: 3.
const SilentAfter = 3

// MinSilence is the shortest silence after which an isolate is no longer
// active, whatever its cadence: 10 s. A lull in an isolate's traffic
// shorter than that is not worth a state.
const MinSilence = 10 * time.Second

// MinCadence is the smallest cadence the dashboard assumes: 10 ms (the
// module's wire.MinSyncInterval order), so a burst of early syncs does not
// make an isolate look silent after a few ms.
const MinCadence = 10 * time.Millisecond

// gapSamples is how many recent gaps between syncs an isolate's cadence
// is the median of.
const gapSamples = 8

// maxGap is the longest gap that counts toward the cadence: longer ones
// are idle stretches, not the schedule.
const maxGap = int64(5 * time.Minute)

// noteGap records a gap between two answered syncs of is.
func (is *dashIsolate) noteGap(gap int64) {
	if gap <= 0 || gap > maxGap {
		return
	}
	is.gaps[is.ngaps%gapSamples] = gap
	is.ngaps++
}

// cadence returns the expected gap between two syncs of is, ns.
func (is *dashIsolate) cadence() int64 {
	n := min(is.ngaps, gapSamples)
	if n == 0 {
		return wire.DefaultSyncInterval
	}
	g := make([]int64, n)
	copy(g, is.gaps[:n])
	sort.Slice(g, func(i, j int) bool { return g[i] < g[j] })
	return max(g[n/2], int64(MinCadence))
}

// active reports whether is synced on schedule at now.
func (is *dashIsolate) active(now int64) bool {
	return is.syncing(now) && now-is.lastWork <= is.silence()
}

// syncing reports whether is syncs on its cadence at now (heartbeats
// included).
func (is *dashIsolate) syncing(now int64) bool {
	return is.syncs > 0 && !is.ended && now-is.lastSync <= is.silence()
}

// silence returns how long is may go without a sync (or without a batch
// with something in it) before it counts as silent (or idle), ns:
// SilentAfter cadences, at least MinSilence.
func (is *dashIsolate) silence() int64 {
	return max(SilentAfter*is.cadence(), int64(MinSilence))
}

// state classifies is at now; hostLive says whether another isolate of
// its host syncs.
func (is *dashIsolate) state(now int64, hostLive bool) string {
	switch {
	case is.ended && is.lastErrorAt <= is.lastSync:
		return StateStopped
	case is.errors > 0 && is.lastErrorAt > is.lastSync:
		return StateFailing
	case is.active(now):
		return StateActive
	case is.syncing(now) || hostLive:
		return StateIdle
	}
	return StateSilent
}

// HostOf returns the edge host part of an isolate id (see above).
func HostOf(id string) string {
	if i := strings.LastIndexByte(id, '~'); i > 0 && isHex(id[i+1:]) {
		id = id[:i]
	}
	if i := strings.LastIndex(id, "/r"); i > 0 && isDigits(id[i+2:]) {
		id = id[:i]
	}
	if i := strings.LastIndexByte(id, '-'); i > 0 && len(id)-i-1 <= 6 && isDigits(id[i+1:]) {
		id = id[:i]
	}
	return id
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return s != ""
}

// Ended records that the batch isolate id (in scope) sent and the
// coordinator answered was its graceful stop (wire.Batch.End).
func (d *Dashboard) Ended(scope, id string) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if is := d.isos[scope+id]; is != nil {
		is.ended = true
	}
}

// liveHosts returns the hosts (scope + HostOf) with an isolate syncing at
// now (heartbeats included; d.mu held).
func (d *Dashboard) liveHosts(now int64) map[string]bool {
	out := map[string]bool{}
	for _, is := range d.isos {
		if is.syncing(now) {
			out[is.scope+"\x00"+HostOf(is.id)] = true
		}
	}
	return out
}
