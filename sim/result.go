package sim

import (
	"math"
	"math/bits"
	"sort"
)

// Result is what one strategy did at one sync interval. Percentages are
// in percent (0..100, or more for overrun and utilisation).
type Result struct {
	Scenario string   `json:"scenario"`
	Strategy string   `json:"strategy"`
	Sync     Duration `json:"sync_interval"`
	Isolates int      `json:"isolates"`
	Duration Duration `json:"duration"`
	Seed     uint64   `json:"seed"`

	Requests int64 `json:"requests"`
	// Offered is the cost asked, summed over key-windows (a request counts
	// in the window it is decided in; one still held for a sync when the
	// run ends is decided in none, so counts only in Requests); Admitted and
	// Denied split it (cost units, as Offered: before, Denied counted
	// requests, and a trace of costs 1-10 read admitted 76,603 and denied
	// 33,720 of 60,000 requests).
	Offered  int64 `json:"offered"`
	Admitted int64 `json:"admitted"`
	Denied   int64 `json:"denied"`

	// Windows counts the (limiter, key, window) triples that saw traffic;
	// Capacity sums their capacity (the limit, or limit+burst for bucket
	// algorithms, per window of the limiter's period).
	Windows  int64 `json:"windows"`
	Capacity int64 `json:"capacity"`
	// Overrun is the cost admitted beyond the capacity, summed over
	// windows; OverrunPct is Overrun / Capacity. A total: it dilutes one
	// bad key-window among many good ones, so read the per-window figures.
	Overrun    int64   `json:"overrun"`
	OverrunPct float64 `json:"overrun_pct"`
	// WorstOverrun is the largest overrun of one key-window;
	// WorstOverrunPct the largest overrun / capacity of one key-window.
	WorstOverrun    int64   `json:"worst_overrun"`
	WorstOverrunPct float64 `json:"worst_overrun_pct"`
	// P99OverrunPct is the 99th percentile over key-windows of overrun /
	// capacity (0 for windows within the limit).
	P99OverrunPct float64 `json:"p99_overrun_pct"`
	// OverWindows counts the key-windows admitted beyond their capacity;
	// OverWindowsPct is their share of Windows.
	OverWindows    int64   `json:"over_windows"`
	OverWindowsPct float64 `json:"over_windows_pct"`
	// Unserved is demand left unserved while there was room: per
	// key-window min(denied cost, bound - admitted) (0 when the window is
	// full), summed, where a window's bound is what an exact limiter could
	// admit of what it was offered (exactwindow.go: min(offered, capacity)
	// for requests of cost 1; a bucket's exact bucket). UnservedPct is
	// Unserved / Σ bound: the share of what the limit allowed that was
	// refused.
	Unserved    int64   `json:"unserved_with_room"`
	UnservedPct float64 `json:"unserved_with_room_pct"`
	// Utilisation is admitted / bound, summed over windows (above 100
	// only when overrunning).
	Utilisation float64 `json:"utilisation_pct"`

	// SyncRequests counts messages sent to the coordinator (batches
	// including retries; for central, one round trip per attempt).
	SyncRequests int64 `json:"sync_requests"`
	// Amendments counts the batches amended in flight (wire/amend.go),
	// part of SyncRequests.
	Amendments int64 `json:"amendments"`
	// SyncCauses splits the batches of SyncRequests by what started them
	// (edgelimit's strategies; with Amendments they sum to SyncRequests).
	SyncCauses      SyncCauses `json:"sync_causes"`
	SyncPerSec      float64    `json:"sync_per_sec"`
	SyncPerDecision float64    `json:"sync_per_decision_pct"`
	SyncBytes       int64      `json:"sync_bytes"`
	SyncBytesPerSec float64    `json:"sync_bytes_per_sec"`
	SyncFailures    int64      `json:"sync_failures"`
	// Waited counts the decisions that waited for the coordinator before
	// their answer (a request held for a sync, SyncRetry; every central
	// round trip); WaitedPct is Waited / Requests, in percent.
	Waited    int64   `json:"waited"`
	WaitedPct float64 `json:"waited_pct"`
	// WaitedDenied counts the decisions of Waited that ended in a denial:
	// mostly an isolate's first request after its window filled, which it
	// learns by asking; WaitedDeniedPct is WaitedDenied / Requests, in
	// percent (a part of WaitedPct).
	WaitedDenied    int64   `json:"waited_denied"`
	WaitedDeniedPct float64 `json:"waited_denied_pct"`
	// WaitP50 and WaitP99 are quantiles over all decisions (0 for one that
	// did not wait) of how long a request waited for its answer, from a
	// histogram with 12.5% buckets (the bucket's upper bound).
	WaitP50 Duration `json:"wait_p50"`
	WaitP99 Duration `json:"wait_p99"`
	// RemainingErrPct is how far the `remaining` of the module's
	// admitted decisions on fixed-window and bucket keys read from the
	// truth (a window's limit less the cost admitted in it, a bucket's
	// tokens left, the decision's included), % of the limit (a bucket's
	// burst), on average: positive reads high.
	// RemainingHighP99Pct is the error 99% of those answers read at most
	// (0.5-point buckets). See remaining.go.
	RemainingErrPct     float64 `json:"remaining_err_pct"`
	RemainingHighP99Pct float64 `json:"remaining_high_p99_pct"`
	// Stranded is budget stranded in leases while demand was refused: per
	// key-window min(its unserved demand, what the coordinator had
	// counted plus reserved in leases for the window at its end - the cost
	// admitted), summed (see stranded.go): a part of Unserved.
	// StrandedPct is Stranded / Σ bound, as UnservedPct.
	Stranded          int64   `json:"stranded"`
	StrandedPct       float64 `json:"stranded_pct"`
	CoordWrites       int64   `json:"coordinator_writes"`
	CoordWritesPerSec float64 `json:"coordinator_writes_per_sec"`
	Evictions         int64   `json:"evictions"`
	// Kills counts the isolates killed (Scenario.Kills).
	Kills int64 `json:"kills"`
	// TraceNotReplayed counts the trace's requests that fall after the
	// simulated time and were not replayed.
	TraceNotReplayed int64 `json:"trace_not_replayed"`

	// Upstream (scenarios with an Upstream): what its API did with the
	// requests admitted. UpstreamAccepted and Upstream429 count its 200s
	// and 429s, UpstreamFailed its 503s in outages. UpstreamUtilisation is
	// accepted / min(offered, true limit), summed over the upstream's
	// key-windows, in percent. UpstreamPauseEvents counts its key-windows
	// with at least one 429; Upstream429WorstIsolate is the most 429s one
	// isolate got in one of them.
	UpstreamAccepted        int64   `json:"upstream_accepted,omitempty"`
	Upstream429             int64   `json:"upstream_429,omitempty"`
	UpstreamFailed          int64   `json:"upstream_failed,omitempty"`
	UpstreamUtilisation     float64 `json:"upstream_utilisation_pct,omitempty"`
	UpstreamPauseEvents     int64   `json:"upstream_pause_events,omitempty"`
	Upstream429WorstIsolate int64   `json:"upstream_429_worst_isolate,omitempty"`

	// Timeline is what the run's first key admitted in each window, when
	// recorded (SweepOptions.Timeline; see timeline.go); nil otherwise.
	Timeline *Timeline `json:"timeline,omitempty"`
}

// histogram is a log-linear histogram of non-negative ns values (8
// sub-buckets per power of two: 12.5% resolution), allocation-free.
type histogram struct {
	zero  int64
	b     [64 * 8]int64
	total int64
}

func (h *histogram) add(v int64) {
	h.total++
	if v <= 0 {
		h.zero++
		return
	}
	h.b[bucket(v)]++
}

func bucket(v int64) int {
	n := bits.Len64(uint64(v)) // 1..63
	if n <= 3 {
		return int(v)
	}
	sub := (v >> (n - 4)) & 7
	return (n-3)*8 + int(sub)
}

// upper returns the largest value of bucket i.
func upper(i int) int64 {
	if i < 8 {
		return int64(i)
	}
	n := i/8 + 3
	sub := int64(i % 8)
	return ((8 + sub + 1) << (n - 4)) - 1
}

// quantile returns the upper bound of the bucket holding quantile q.
func (h *histogram) quantile(q float64) int64 {
	if h.total == 0 {
		return 0
	}
	rank := int64(q*float64(h.total-1)) + 1
	if rank <= h.zero {
		return 0
	}
	c := h.zero
	for i, n := range h.b {
		c += n
		if c >= rank {
			return upper(i)
		}
	}
	return 0
}

// windowQuantile returns quantile q of the per-window overrun percentages
// of n windows, of which the ones in over are above 0 and the rest 0
// (nearest rank). over is sorted in place.
func windowQuantile(over []float64, n int64, q float64) float64 {
	if n <= 0 || len(over) == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(n))) // 1-based rank in ascending order
	zeros := n - int64(len(over))
	if rank <= zeros {
		return 0
	}
	sort.Float64s(over)
	return over[min(rank-zeros, int64(len(over)))-1]
}
