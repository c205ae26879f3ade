package merge

import (
	"fmt"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Isolate namespaces: the coordinator keys an isolate by scope + id, where
// scope is derived from the bearer token that syncs it (16 hex digits and a
// '/'), or empty without tokens.
const (
	// ScopeLen is the length of a token's scope, in bytes: 17.
	ScopeLen = 17
	// MaxScopedIDLen is the longest isolate id stored (scope + id), in bytes.
	MaxScopedIDLen = ScopeLen + wire.MaxIsolateIDLen
)

// MergeStats counts what a Merger did since it was created.
type MergeStats struct {
	Batches       int64 // batches applied
	Duplicates    int64 // retries of the isolate's last applied batch, not applied again
	SeqRefused    int64 // batches refused for their sequence number (stale, gap, conflict; see sequence.go)
	DeltasApplied int64 // entries applied
	DeltasStale   int64 // windowed entries older than the newest window - 1, dropped
	GCDeleted     int64 // records deleted by GC
	Checkpoints   int64 // checkpoints committed
	Replayed      int64 // log records replayed (after a crash or a failed commit)
	// SignalsIgnored counts upstream signals (wire.Signal) for limiters
	// without an upstream configuration, which the merge ignores.
	SignalsIgnored int64
	// Amendments counts batches with asks (wire/amend.go); AsksGranted
	// the cost units granted to asks of amendments that retried an
	// applied batch.
	Amendments, AsksGranted int64
	// LeasesReclaimed counts leases charged and given up to make room
	// for a new isolate on a key whose every entry held one (reclaim.go).
	LeasesReclaimed int64
	// CorruptRecords counts key records that did not decode, started
	// again (loadKey); RecordsRefit those written under another period
	// (windows ahead of the clock, a TAT past the bucket's reach) and
	// fitted to the limiter's configuration (refit.go).
	CorruptRecords, RecordsRefit int64
	// Handovers counts key entries (leases) a new incarnation took over
	// from its predecessor; HandoversRefused the batches that named a
	// predecessor without its secret, or one unknown (handover.go).
	Handovers, HandoversRefused int64
}

// Merger is the merge state machine: it applies batches to the state of
// each (limiter, key), computes replies and leases, and stages the writes
// for one atomic Commit. It never reads a clock (now is an argument), starts
// no goroutine and is not safe for concurrent use.
//
// Apply mutates the in-memory state at once; Commit writes everything staged
// since the previous Commit in one Store commit. When Commit fails, every
// cached state is dropped and re-read from the Store, so a failed commit
// leaves no trace (View.Isolates of approximate limiters restarts from 1).
type Merger struct {
	opts       MergerOptions
	lims       map[string]*wire.LimiterConfig
	store      Store
	keys       map[string]*keyState
	keyWeight  int // Σ cacheWeight of keys' storage keys (cache.go)
	hwms       map[string]*hwmState
	pred       string // the scoped id of the batch being applied's predecessor, its secret proven (handover.go); "": none
	isoEntries int
	obs        Observer // told of each applied batch; nil: none (SetObserver)
	dirtyKeys  []*keyState
	dirtyHWMs  []*hwmState
	deletes    [][]byte
	buf        []byte
	gen        int64 // last stage handed out by Stage
	ckptDone   int64 // every state logged up to this stage is in its own record
	ckptOps    []Op  // newest logged op per key since the last checkpoint began (aliasing the log records)
	ckptCarry  []Op  // the ops of a failed checkpoint, written by the next one first
	stageRefs  []stageRef
	ckptEpoch  int64 // numbers the checkpoints (keyState.epoch)
	ckptCount  int   // distinct keys and isolates logged since the last checkpoint began
	ckptBytes  int64 // log bytes since the last checkpoint began
	ckptAt     int64 // time of the last checkpoint, ns
	evictStuck int64 // ckptDone when evict last stopped short of its target (-1: it did not)
	recover    bool  // the cache was dropped after a failure: replay the log first
	aborts     int64 // times the cache was dropped (Abort, failed Committed)
	gcCursor   []byte
	gcStart    int64 // ns: the first GC, from which OrphanGrace counts
	stats      MergeStats
	res        *residency  // nil unless EnablePrefetch
	applySeq   int64       // numbers the Apply calls (keyState.mark)
	oneWay     int64       // the batch being applied: how long it took to come, ns (now - At, within [0, maxOneWay]); its reply takes as long
	cutAt      int64       // the batch being applied: its cut (wire.Batch.At, the isolate's clock), ns
	spans      bool        // the batch being applied reads wire.View.StandTo (wire.Batch.Spans)
	pace       bool        // the batch being applied reads wire.View.Pace (wire.Batch.Pace)
	slots      []slot      // scratch of Apply
	sigs       []*keyState // scratch of Apply: the keys of the batch's signals
	at         []int32     // scratch of Apply
	resets     resetLog    // recent resets, told to every isolate (resetlog.go)
	full       fullLog     // key-windows that counted their limit, told to every isolate (fullnotice.go)
	limitsGen  int64       // the generation of opts.Limits adopted (limits.go)
}

// Observer is told of each batch a Merger applies (not of duplicates), with
// its reply, at the time now (ns) it was applied; the dashboard is one. It
// is called with the Merger's caller holding it, so it must not call back.
type Observer interface {
	Applied(b *wire.Batch, rp *wire.Reply, now int64)
}

// SetObserver makes obs (nil: none) the Observer of m's applied batches.
func (m *Merger) SetObserver(obs Observer) { m.obs = obs }

// NewMerger returns a Merger for the limiters of cfg over store.
func NewMerger(cfg wire.Config, store Store, opts MergerOptions) (*Merger, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("merge: config: %w", err)
	}
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	m := &Merger{opts: opts, store: store, evictStuck: -1, lims: map[string]*wire.LimiterConfig{},
		keys: map[string]*keyState{}, hwms: map[string]*hwmState{}}
	for i := range cfg.Limiters {
		l := cfg.Limiters[i]
		m.lims[l.Name] = &l
	}
	m.refreshLimits()
	// What a crash left in the log goes to the records first.
	if err := m.Recover(); err != nil {
		return nil, err
	}
	return m, nil
}

// Recover replays the log into the records and drops the cache (see
// wal.go). NewMerger calls it, and the Merger calls it itself after a failed
// commit before it reads state again; the caller must make sure no
// checkpoint is being committed meanwhile.
func (m *Merger) Recover() error {
	n, err := replayLog(m.store)
	if err != nil {
		m.recover = true
		return err
	}
	m.stats.Replayed += int64(n)
	m.dropCache()
	m.resetCkpt()
	m.ckptDone = m.gen
	m.recover = false
	return nil
}

// NeedsRecovery reports whether the next operation will first replay the
// log (a commit failed since the last replay).
func (m *Merger) NeedsRecovery() bool { return m.recover }

func (m *Merger) recovered() error {
	if !m.recover {
		return nil
	}
	if err := m.Recover(); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return nil
}

// Stats returns the counters of m.
func (m *Merger) Stats() MergeStats { return m.stats }

// Limiter returns the configuration of the limiter named name, or nil.
func (m *Merger) Limiter(name string) *wire.LimiterConfig { return m.lims[name] }
