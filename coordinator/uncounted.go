package coordinator

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Entries a coordinator does not count. A batch may name limiters its
// token's edge role is not granted, or that the coordinator does not run
// (an edge configured with a limiter the coordinator lacks, or one removed
// from the coordinator's configuration while edges still run it). Those
// entries, signals, final denials and asks are taken out of the batch and
// the rest is applied: the reply names them in Edgelimit-Uncounted (a
// comma-separated list of limiter names), the metric
// edgelimit_coordinator_entries_uncounted_total{reason} counts them, and
// the coordinator logs each (token, limiter, reason) once. Refusing the
// whole batch, as the coordinator did before, wedged its isolate: the
// module resends a refused batch as it was, so one request on such a
// limiter stopped every later count of that isolate from arriving.
//
// A retry of a batch is taken out the same way, so it is recognised as the
// same batch (merge's digest is of what is applied); a change of the
// token's grants or of the configuration between a batch and its retry
// makes the retry another batch under the same sequence number, which the
// coordinator refuses as a conflict (409): the edge then resends it under
// a new incarnation.

// Reasons an entry is not counted (the metric's reason label).
const (
	uncountedForbidden = "forbidden"       // the token's edge role is not granted the limiter
	uncountedUnknown   = "unknown_limiter" // the coordinator runs no such limiter
	uncountedPeriod    = "period_mismatch" // the edge runs the limiter with another period (periodmismatch.go)
)

// uncountedLog remembers the (scope, limiter, reason) triples logged.
type uncountedLog struct {
	mu    sync.Mutex
	seen  map[[3]string]bool
	lines map[string]int // by scope
}

// stripUncounted takes out of b what reason(limiter) says is not counted
// ("" for a counted limiter) and returns the distinct limiter names taken
// out, sorted, with their reasons, and how many items (entries, signals,
// denials, asks) it took out for each reason.
func stripUncounted(b *wire.Batch, reason func(limiter string) string) (names, reasons []string, byReason map[string]int) {
	drop := func(l string) bool {
		r := reason(l)
		if r == "" {
			return false
		}
		if byReason == nil {
			byReason = map[string]int{}
		}
		byReason[r]++
		if i, ok := slices.BinarySearch(names, l); !ok {
			names = slices.Insert(names, i, l)
			reasons = slices.Insert(reasons, i, r)
		}
		return true
	}
	b.Entries = slices.DeleteFunc(b.Entries, func(d wire.Delta) bool { return drop(d.Limiter) })
	b.Signals = slices.DeleteFunc(b.Signals, func(s wire.Signal) bool { return drop(s.Limiter) })
	b.Denials = slices.DeleteFunc(b.Denials, func(d wire.Denial) bool { return drop(d.Limiter) })
	b.Asks = slices.DeleteFunc(b.Asks, func(a wire.Ask) bool { return drop(a.Limiter) })
	return names, reasons, byReason
}

// uncounted returns the reason an entry of limiter l sent by p is not
// counted, or "" when it is; otherPeriod names the limiters the batch runs
// with another period (periodMismatches).
func (c *Coordinator) uncounted(p *principal, l string, otherPeriod map[string]bool) string {
	switch {
	case c.m.Limiter(l) == nil:
		return uncountedUnknown
	case !p.grants(l):
		return uncountedForbidden
	case otherPeriod[l]:
		return uncountedPeriod
	}
	return ""
}

// noteUncounted counts (byReason) and logs (once per scope, limiter and
// reason) what was taken out of a batch of isolate in scope: the items of
// limiters names, with reasons.
func (c *Coordinator) noteUncounted(scope, isolate string, names, reasons []string, byReason map[string]int) {
	for r, n := range byReason {
		c.met.uncounted.WithLabelValues(r).Add(float64(n))
	}
	c.uncountedLog.mu.Lock()
	defer c.uncountedLog.mu.Unlock()
	if c.uncountedLog.seen == nil {
		c.uncountedLog.seen, c.uncountedLog.lines = map[[3]string]bool{}, map[string]int{}
	}
	for i, l := range names {
		k := [3]string{scope, l, reasons[i]}
		n := c.uncountedLog.lines[scope]
		if c.uncountedLog.seen[k] || n > maxUncountedLogged {
			continue
		}
		c.uncountedLog.lines[scope] = n + 1
		if n == maxUncountedLogged {
			c.log.Warn("coordinator: this token's batches named more limiters it may not count than are logged; the rest are counted in edgelimit_coordinator_entries_uncounted_total only",
				slog.Int("logged", maxUncountedLogged), slog.String("scope", scope))
			continue
		}
		c.uncountedLog.seen[k] = true
		c.log.Warn("coordinator: a batch names a limiter it may not count; its entries are dropped, the rest applied",
			slog.String("limiter", l), slog.String("reason", reasons[i]), slog.String("scope", scope), slog.String("isolate", isolate))
	}
}

// maxUncountedLogged bounds the log lines of uncounted limiters (one per
// scope, limiter and reason) of each scope (token): a client naming ever
// new limiters does not grow the coordinator's memory or its log without
// end, and, the bound being its own, does not use up another token's
// lines (one bound for all, a client's 1,024 made-up names left another
// token's misconfiguration unlogged). The scopes are the configured
// tokens', so the memory stays bounded.
const maxUncountedLogged = 64

// headerNames joins limiter names for the Edgelimit-Uncounted header: a
// batch may name any bytes, and a control byte or a line break in a header
// made the whole reply unreadable to the client (Go's: "malformed MIME
// header line"), on every retry. Bytes outside printable ASCII, commas
// (the separator) and percent signs are percent-encoded (%XX).
func headerNames(names []string) string {
	var b strings.Builder
	for i, n := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		for j := 0; j < len(n); j++ {
			c := n[j]
			if c < 0x21 || c > 0x7e || c == ',' || c == '%' {
				fmt.Fprintf(&b, "%%%02X", c)
				continue
			}
			b.WriteByte(c)
		}
	}
	return b.String()
}
