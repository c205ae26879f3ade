package merge

import (
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/edgelimit/edgelimit/wasm/limitmath"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Run-time limits. An operator may change a limiter's limit or a key's
// override while the coordinator runs (the control API, a reload of the
// configuration file). Limits is the one home of the limits in force: every
// Merger given it (MergerOptions.Limits: the coordinator's, and each
// Merger of shared mode) adopts a new generation before it applies the
// next batch, so the grants, leases and View.Limit of every reply after the
// change use it. Only Limit and Overrides change at run time; the name,
// algorithm, period, burst, mode and upstream settings of a limiter are
// fixed for the life of the process.

// Limits holds the limiters' current limits, published as immutable
// generations. It is safe for concurrent use.
type Limits struct {
	cur atomic.Pointer[LimitsGen]
}

// LimitsGen is one generation of the run-time limits. It is never changed
// once published: a change publishes a new one.
type LimitsGen struct {
	// Gen numbers the generations: 1 for the configuration, one more for
	// each change.
	Gen int64
	// Config is the configuration with every limiter's current Limit and
	// Overrides.
	Config wire.Config
}

// NewLimits returns the Limits of cfg (generation 1). cfg must be valid.
func NewLimits(cfg wire.Config) *Limits {
	l := &Limits{}
	l.cur.Store(&LimitsGen{Gen: 1, Config: CloneConfig(cfg)})
	return l
}

// Load returns the current generation.
func (l *Limits) Load() *LimitsGen { return l.cur.Load() }

// Publish makes cfg (the current configuration with other limits and
// overrides) the next generation and returns it. It refuses, changing
// nothing, a cfg that is not valid or that changes anything else than the
// limits and overrides of the current limiters (their names, order,
// algorithms, periods...). Publishers must not race: the caller serialises
// its changes.
func (l *Limits) Publish(cfg wire.Config) (*LimitsGen, error) {
	old := l.cur.Load()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("merge: limits: %w", err)
	}
	if len(cfg.Limiters) != len(old.Config.Limiters) {
		return nil, fmt.Errorf("merge: limits: %d limiters, the running configuration has %d (limiters are added or removed by a restart)", len(cfg.Limiters), len(old.Config.Limiters))
	}
	for i := range cfg.Limiters {
		a, b := cfg.Limiters[i], old.Config.Limiters[i]
		a.Limit, a.Overrides, b.Limit, b.Overrides = 0, nil, 0, nil
		if a.Name != b.Name || a.Algorithm != b.Algorithm || a.Period != b.Period || a.Burst != b.Burst ||
			a.Mode != b.Mode || a.ReadThrough != b.ReadThrough || a.FailPolicy != b.FailPolicy ||
			!upstreamEqual(a.Upstream, b.Upstream) {
			return nil, fmt.Errorf("merge: limits: limiter %q: only its limit and overrides change at run time (the rest needs a restart)", b.Name)
		}
	}
	g := &LimitsGen{Gen: old.Gen + 1, Config: CloneConfig(cfg)}
	l.cur.Store(g)
	return g, nil
}

func upstreamEqual(a, b *wire.UpstreamConfig) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// CloneConfig copies cfg's limiters and their overrides, so the copy
// shares nothing that the caller may change.
func CloneConfig(cfg wire.Config) wire.Config {
	cfg.Limiters = slices.Clone(cfg.Limiters)
	for i := range cfg.Limiters {
		l := &cfg.Limiters[i]
		l.Overrides = slices.Clone(l.Overrides)
		if l.Upstream != nil {
			u := *l.Upstream
			l.Upstream = &u
		}
	}
	return cfg
}

// refreshLimits adopts the current generation of m.opts.Limits when m has
// not yet: each limiter's Limit and Overrides are written into the
// configuration m's key states point to, so every cached key follows at
// once. Only the Merger's owner calls it (between two operations); Check
// and Prefetch, which run concurrently with it, read the name and period
// only.
func (m *Merger) refreshLimits() {
	if m.opts.Limits == nil {
		return
	}
	g := m.opts.Limits.Load()
	if g.Gen == m.limitsGen {
		return
	}
	for i := range g.Config.Limiters {
		l := &g.Config.Limiters[i]
		if own := m.lims[l.Name]; own != nil {
			own.Limit, own.Overrides = l.Limit, l.Overrides // the generation's slice: never changed
		}
	}
	m.limitsGen = g.Gen
	m.forgetAllFull() // a window full under the old limits may not be under the new
}

// LimitsGen returns the generation of the run-time limits m applies (0:
// the configuration it was made with, without MergerOptions.Limits).
func (m *Merger) LimitsGen() int64 {
	m.refreshLimits()
	return m.limitsGen
}

// NoticeNear tells the isolates, with a reset notice (Notice), to drop
// what they cached of up to max keys of limiter cached here that take the
// limiter's limit (no override) and were near oldLimit at now (ns): the
// keys an isolate may be denying from its cache, which it would otherwise
// not sync (and so not hear of a raised limit) until its denial ends.
// Near: windowed, a count of the current and previous window of at least
// half of oldLimit (an isolate adds what it has not reported yet); a
// bucket, any cost in use. It returns how many keys it noticed and how
// many near keys it left out (max reached).
func (m *Merger) NoticeNear(limiter string, oldLimit int64, max int, now int64) (noticed, left int) {
	lim := m.lims[limiter]
	if lim == nil {
		return 0, 0
	}
	w := limitmath.Window(now, lim.Period)
	for _, st := range m.keys {
		if st.lim != lim {
			continue
		}
		near := st.tat > now
		if !lim.IsBucket() {
			cur, prev := st.windowCounts(w)
			near = 2*addSat(cur, prev) >= oldLimit
		}
		if !near {
			continue
		}
		_, key, _ := splitKeyStorageKey([]byte(st.skey))
		if lim.LimitFor(key) != lim.Limit {
			continue // an override: the limiter's limit is not the key's
		}
		if noticed >= max {
			left++
			continue
		}
		m.Notice(limiter, key, now)
		noticed++
	}
	return noticed, left
}
