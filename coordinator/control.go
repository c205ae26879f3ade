package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgelimit/edgelimit/coordinator/merge"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Live control: an operator changes a limiter's limit or a key's override,
// or pauses a limiter or a key fleet-wide (a kill switch for an upstream),
// while the coordinator runs: through the API (control_http.go, the admin
// role), the dashboard's control panel, or a reload of the configuration
// file (ReloadConfig: SIGHUP). Every change
//
//   - takes effect at once for the coordinator's grants and answers: the
//     limits go to merge.Limits, the one home of the limits in force, which
//     the Merger (each Merger in shared mode) adopts before its next batch,
//     and to the dashboard and the per-limiter metrics; a pause decorates
//     every reply that names the limiter or key;
//   - reaches every isolate that syncs with its next reply (View.Limit for
//     edges that send `lim`, an upstream pause wire.UpView for a pause), so
//     within two sync intervals;
//   - is logged once (an audit line: who, what, old -> new, reason, expiry);
//   - is stored (the control record, control_store.go): it survives a
//     restart, and in shared mode (Redis) every coordinator of the store
//     reads it (ControlPoll).
//
// A run-time limit holds until the configuration file's value for it
// changes: each stored change remembers the file's value it was made over
// (its base), and a start or reload whose file says otherwise drops it (the
// file was edited since: it wins), with a log line.
//
// Lowering a limit below a key's count: the leases already granted stay
// (their isolates admit up to them and report it) and no new lease or
// admission is granted until the count is back under the new limit, so a
// window ends at most at its count plus the leases held when the limit
// dropped (merge.TestLimitLoweredBelowCount).
//
// A pause is told to the isolates as an upstream pause of each key a reply
// names: the isolate denies the key until the pause ends, as after an
// upstream's 429. Resuming (or shortening) lifts it at the isolates with a
// reset notice of each key told (merge.Merger.Notice: the isolate drops
// what it cached of the key, its pause among it, and the next view brings
// the counts back), within two sync intervals. Shared mode has no reset
// notices, and the coordinator tracks the keys told of a limiter's pause up
// to maxPauseTold: the other keys are told the pause ControlPauseChunk at a
// time (renewed with every reply that names them), so a resume reaches
// them within that; in shared mode sooner, as for liftWindow after a
// resume the replies reset a lifted key that a batch names without cost
// (decorate), as an isolate that holds the pause names it every two sync
// intervals.
// Limits of the control API.
const (
	// ControlMaxPause is the longest pause: 30 days.
	ControlMaxPause = 30 * 24 * time.Hour
	// ControlMaxReason is the longest reason, in bytes: 500.
	ControlMaxReason = 500
	// ControlMaxPauses is the most pauses in force at once: 1024.
	ControlMaxPauses = 1024
	// ControlPauseChunk is how much of a pause a key is told at a time
	// when a resume could not reach it by a reset notice (shared mode, or
	// more than maxPauseTold keys of one limiter): 10 s.
	ControlPauseChunk = 10 * time.Second
	// ControlPoll is how often a coordinator in shared mode reads the
	// control record other coordinators may have changed: 1 s.
	ControlPoll = time.Second
)

// Pause is an operator's fleet-wide pause of a limiter (Key "") or of one
// of its keys.
type Pause struct {
	Limiter string `json:"limiter"`
	Key     string `json:"key,omitempty"`
	// KeyB64 is Key's exact bytes in unpadded base64url (in views only;
	// empty for a limiter's pause).
	KeyB64 string `json:"key_b64,omitempty"`
	// Until is when the pause ends, coordinator time (Unix ns).
	Until int64 `json:"until_ns"`
	// Left is how long the pause still lasts, ns (in views only).
	Left   int64  `json:"left_ns,omitempty"`
	Reason string `json:"reason"`
	// By is who paused: the bearer token's scope and roles, or the
	// configuration file.
	By string `json:"by"`
	// At is when the pause was set, coordinator time (Unix ns).
	At int64 `json:"at_ns"`
}

// ErrControl wraps the refusals of a control change (bad value, unknown
// pause): HTTP 400 or 404.
var ErrControl = errors.New("coordinator: control")

// errNoPause is the ErrControl of a resume without a pause, errNoOverride
// of the removal of an override not in force: HTTP 404.
var (
	errNoPause    = fmt.Errorf("%w: no such pause", ErrControl)
	errNoOverride = fmt.Errorf("%w: no such override", ErrControl)
)

// control is the coordinator's live control state.
type control struct {
	mu     sync.Mutex // serialises changes
	limits *merge.Limits
	own    wire.Config   // the configuration file's limiters (Options.Config, then each reload)
	file   wire.Config   // own, in shared mode with the stored file layer's limits (control_file.go)
	rec    controlRecord // what is stored: the changes and pauses in force
	store  controlStore
	log    *slog.Logger
	// notices: lift a resumed pause with reset notices (not shared mode).
	notices bool

	active atomic.Pointer[pauseIndex] // the pauses in force; nil: none

	toldMu sync.Mutex
	told   map[string]map[string]bool // limiter -> keys told of its pause

	liftMu  sync.Mutex                          // serialises lift
	lifts   atomic.Pointer[map[[2]string]int64] // shared mode: (limiter, key or "") -> end of its lift window, ns
	liftEnd atomic.Int64                        // the last end in lifts, ns
}

// newControl returns the control state over the configuration cfg, its
// record kept in store (openControl reads it).
func newControl(cfg wire.Config, store controlStore, notices bool, log *slog.Logger) *control {
	return &control{limits: merge.NewLimits(cfg), own: merge.CloneConfig(cfg), file: merge.CloneConfig(cfg), store: store, notices: notices,
		log: log, told: map[string]map[string]bool{}}
}

// fileValue returns the configuration file's limit of limiter (key "") or
// override of key (0: none), and whether the limiter exists.
func fileValue(cfg *wire.Config, limiter, key string) (int64, bool) {
	l := cfg.Limiter(limiter)
	if l == nil {
		return 0, false
	}
	if key == "" {
		return l.Limit, true
	}
	for _, o := range l.Overrides {
		if o.Key == key {
			return o.Limit, true
		}
	}
	return 0, true
}

// effective returns the configuration file's limiters with the changes of
// rec applied.
func effective(file wire.Config, rec *controlRecord) wire.Config {
	cfg := merge.CloneConfig(file)
	changed := map[[2]string]int64{} // (limiter, key) -> limit (0: override removed)
	for _, s := range rec.Limits {
		l := cfg.Limiter(s.Limiter)
		if l == nil {
			continue
		}
		if len(s.Key) == 0 {
			l.Limit = s.Limit
			continue
		}
		changed[[2]string{s.Limiter, string(s.Key)}] = s.Limit
	}
	if len(changed) == 0 {
		return cfg
	}
	for i := range cfg.Limiters {
		l := &cfg.Limiters[i]
		seen := map[string]bool{}
		kept := l.Overrides[:0]
		for _, o := range l.Overrides {
			n, ok := changed[[2]string{l.Name, o.Key}]
			seen[o.Key] = ok
			switch {
			case !ok:
				kept = append(kept, o)
			case n > 0:
				kept = append(kept, wire.Override{Key: o.Key, Limit: n})
			}
		}
		l.Overrides = kept
		for _, s := range rec.Limits { // new overrides, in the order they were set
			if s.Limiter == l.Name && len(s.Key) > 0 && s.Limit > 0 && !seen[string(s.Key)] {
				l.Overrides = append(l.Overrides, wire.Override{Key: string(s.Key), Limit: s.Limit})
			}
		}
	}
	return cfg
}

// rebase drops from rec the changes whose base is no longer the file's
// value (the file was edited there since: it wins) and the pauses of
// limiters the file lacks, and returns a description of each.
func rebase(file *wire.Config, rec *controlRecord) []string {
	var dropped []string
	rec.Limits = slices.DeleteFunc(rec.Limits, func(s limitSetting) bool {
		v, ok := fileValue(file, s.Limiter, string(s.Key))
		if ok && v == s.Base {
			return false
		}
		dropped = append(dropped, fmt.Sprintf("%s %d (the file's value changed from %d to %d)", target(s.Limiter, string(s.Key)), s.Limit, s.Base, v))
		return true
	})
	rec.Pauses = slices.DeleteFunc(rec.Pauses, func(p pauseRecord) bool {
		if file.Limiter(p.Limiter) != nil {
			return false
		}
		dropped = append(dropped, "pause of "+target(p.Limiter, string(p.Key))+" (no such limiter)")
		return true
	})
	return dropped
}

// target names a limiter ("limiter llm") or a key's override ("llm key
// \"acme\"") in log lines.
func target(limiter, key string) string {
	if key == "" {
		return "limiter " + strconv.Quote(limiter)
	}
	return "limiter " + strconv.Quote(limiter) + " key " + strconv.Quote(key)
}

// installControl makes rec (valid, stored), over the configuration
// file's limiters file, the state in force: its limits go to
// merge.Limits, the dashboard and the metrics, its pauses to the replies.
// The caller holds ct.mu.
func (c *Coordinator) installControl(rec controlRecord, file wire.Config) error {
	ct := c.ctl
	cfg := effective(file, &rec)
	g := ct.limits.Load()
	if !slices.EqualFunc(cfg.Limiters, g.Config.Limiters, sameLimits) {
		ng, err := ct.limits.Publish(cfg)
		if err != nil {
			return err
		}
		c.dash.SetLimits(ng.Config)
		c.met.lim.setLimits(ng.Config)
	}
	ct.rec, ct.file = rec, file
	var ps *pauseIndex
	if len(rec.Pauses) > 0 {
		ps = &pauseIndex{limiters: map[string]int64{}, keys: map[[2]string]int64{}}
		for _, p := range rec.Pauses {
			if len(p.Key) == 0 {
				ps.limiters[p.Limiter] = p.Until
			} else {
				ps.keys[[2]string{p.Limiter, string(p.Key)}] = p.Until
			}
			ps.end = max(ps.end, p.Until)
		}
	}
	ct.active.Store(ps)
	return nil
}

// sameLimits reports whether two limiters have the same limit and
// overrides.
func sameLimits(a, b wire.LimiterConfig) bool {
	return a.Limit == b.Limit && slices.EqualFunc(a.Overrides, b.Overrides, func(x, y wire.Override) bool { return x.Key == y.Key && x.Limit == y.Limit })
}

// audit is one change for the audit log.
type audit struct {
	what, old, new string
	reason         string
	until          int64 // pauses: when it ends, ns; 0: none
}

// change applies fn to a copy of the control record at now (with the
// configuration file's limiters file: ct.file, or newFile when set, and
// the limiters in force cur), stores the result and installs it (newFile
// becoming ct.file); each audit line fn returns is logged with who.
// In shared mode it first reads the stored record (another coordinator's
// changes) and, when another coordinator stores one meanwhile, starts
// again (up to 5 times). An error of fn changes nothing.
func (c *Coordinator) change(ctx context.Context, who string, newFile *wire.Config, fn func(rec *controlRecord, file, cur *wire.Config, now int64) ([]audit, error)) error {
	ct := c.ctl
	ct.mu.Lock()
	defer ct.mu.Unlock()
	for attempt := 0; ; attempt++ {
		if err := c.pullControl(ctx); err != nil {
			return err
		}
		now := c.opts.Clock.Now()
		old := ct.rec
		rec := old.clone()
		rec.prune(now)
		rec.Told = nil // in memory (ct.told) while the coordinator runs
		cur := effective(ct.file, &rec)
		file := ct.file
		if newFile != nil {
			file = *newFile
		}
		lines, err := fn(&rec, &file, &cur, now)
		if err != nil {
			return err
		}
		if newFile != nil && ct.store.shared() {
			rec.File = layerOf(&file, who, now) // every coordinator runs it (control_file.go)
		}
		if err := effectiveValid(file, &rec); err != nil {
			return err
		}
		prev := rec.Gen
		rec.Gen++
		saved, err := ct.store.save(ctx, prev, &rec)
		if errors.Is(err, ErrSharedControl) {
			return err
		}
		if err != nil {
			return fmt.Errorf("%w: storing the control record: %w", ErrUnavailable, err)
		}
		if !saved {
			if attempt < 5 {
				continue // another coordinator changed it: again, on its record
			}
			return fmt.Errorf("%w: the control record kept changing under this change (other coordinators)", ErrUnavailable)
		}
		if err := c.installControl(rec, file); err != nil {
			return err // checked by effectiveValid: not reached
		}
		if newFile != nil {
			ct.own = merge.CloneConfig(*newFile)
		}
		c.liftPauses(&old, &rec)
		c.noticeRaised(&cur, ct.limits.Load().Config)
		for _, l := range lines {
			args := []any{"by", who, "change", l.what, "old", l.old, "new", l.new, "reason", l.reason, "generation", rec.Gen}
			if l.until != 0 {
				args = append(args, "until", time.Unix(0, l.until).UTC().Format(time.RFC3339), "for", time.Duration(l.until-now).Round(time.Second).String())
			}
			c.log.Info(fmt.Sprintf("coordinator: audit: %s: %s -> %s", l.what, l.old, l.new), args...)
		}
		return nil
	}
}

// usableControl returns rec, a stored control record (err: how it failed
// to decode, or nil), when it decoded and its changes make a valid
// configuration of file (the configuration file's limiters in force); else it logs why and returns an
// empty record of its generation: the configuration file's limits, no
// pause, until the next change overwrites the stored record.
func (c *Coordinator) usableControl(rec *controlRecord, err error, file wire.Config) *controlRecord {
	if err == nil {
		err = effectiveValid(file, rec)
	}
	if err == nil {
		return rec
	}
	c.log.Error("coordinator: control: the stored control record is not used, the configuration file's limits are in force and nothing is paused until the next change overwrites it: "+err.Error(),
		"generation", rec.Gen, "error", err.Error())
	return &controlRecord{Gen: rec.Gen}
}

// effectiveValid checks the configuration rec makes of file.
func effectiveValid(file wire.Config, rec *controlRecord) error {
	cfg := effective(file, rec)
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrControl, err)
	}
	return nil
}

// pullControl adopts the stored control record when another coordinator
// changed it (shared mode; a no-op for Pebble, whose only writer is this
// process). The caller holds ct.mu.
func (c *Coordinator) pullControl(ctx context.Context) error {
	ct := c.ctl
	if !ct.store.shared() {
		return nil
	}
	rec, err := ct.store.load(ctx, ct.rec.Gen)
	if err != nil && !errors.Is(err, errCorruptControl) {
		return fmt.Errorf("%w: reading the control record: %w", ErrUnavailable, err)
	}
	if rec == nil || rec.Gen == ct.rec.Gen {
		return nil
	}
	file := layered(ct.own, rec.File)
	for _, d := range rebase(&file, rec) {
		c.log.Warn("coordinator: control: the stored change of " + d + " does not apply to this coordinator's configuration; ignored")
	}
	rec = c.usableControl(rec, err, file)
	old := ct.rec
	oldFile := ct.file
	if err := c.installControl(*rec, file); err != nil {
		return err
	}
	c.liftPauses(&old, rec)
	c.log.Info("coordinator: control: adopted generation "+strconv.FormatInt(rec.Gen, 10)+" of the control record (another coordinator's change)", "generation", rec.Gen)
	by := "this coordinator's own configuration file" // a record without the layer (written by an older version, or not usable)
	if rec.File != nil {
		by = rec.File.By
	}
	for _, l := range fileChanges(&oldFile, &file) {
		c.log.Info(fmt.Sprintf("coordinator: control: the configuration file's %s: %s -> %s (from %s)", l.what, l.old, l.new, by),
			"by", by, "change", l.what, "old", l.old, "new", l.new, "generation", rec.Gen)
	}
	return nil
}

// noticeRaised sends reset notices (not in shared mode) for the keys whose
// limit rose from old to cfg: an isolate that denies a key from its cache
// does not sync it, so it would not hear of the new limit until its denial
// ends (in shared mode it syncs the key after two sync intervals without
// a reply: wasm/core/resets.go, recheck). A limiter's limit: its keys
// cached here near the old limit (merge.Merger.NoticeNear), up to
// maxPauseTold; an override: its key.
func (c *Coordinator) noticeRaised(old *wire.Config, cfg wire.Config) {
	if !c.ctl.notices {
		return
	}
	var limiters []string
	var keys [][2]string
	for i := range cfg.Limiters {
		n, o := &cfg.Limiters[i], old.Limiter(cfg.Limiters[i].Name)
		if n.Limit > o.Limit {
			limiters = append(limiters, n.Name)
		}
		limitFor := func(l *wire.LimiterConfig) func(string) int64 {
			m := make(map[string]int64, len(l.Overrides))
			for _, ov := range l.Overrides {
				if _, dup := m[ov.Key]; !dup { // the first override of a key wins, as in LimitFor
					m[ov.Key] = ov.Limit
				}
			}
			return func(k string) int64 {
				if v, ok := m[k]; ok {
					return v
				}
				return l.Limit
			}
		}
		nFor, oFor := limitFor(n), limitFor(o)
		for _, ov := range n.Overrides {
			if nFor(ov.Key) > oFor(ov.Key) {
				keys = append(keys, [2]string{n.Name, ov.Key})
			}
		}
		for _, ov := range o.Overrides {
			if nFor(ov.Key) > oFor(ov.Key) {
				keys = append(keys, [2]string{n.Name, ov.Key})
			}
		}
	}
	if len(limiters)+len(keys) == 0 {
		return
	}
	c.do(context.Background(), func(m *merge.Merger, now int64) error {
		for _, k := range keys {
			m.Notice(k[0], k[1], now)
		}
		for _, l := range limiters {
			if n, left := m.NoticeNear(l, old.Limiter(l).Limit, maxPauseTold, now); left > 0 {
				c.log.Warn(fmt.Sprintf("coordinator: control: the raised limit of %s was noticed to the isolates for %d keys near the old limit, not for %d more: an isolate denying one of those from its cache hears of it when its denial ends", target(l, ""), n, left))
			}
		}
		return nil
	})
}

// controlStoreOf returns where the control record of a coordinator over
// store lives: in store itself (Pebble), in its ControlStore (shared
// mode), or nowhere (a shared store without one: changes are refused).
func controlStoreOf(store merge.Store) controlStore {
	if _, shared := store.(merge.SharedStore); !shared {
		return pebbleControl{store}
	}
	if cs, ok := store.(ControlStore); ok {
		return sharedControl{cs}
	}
	return noControl{}
}

// openControl puts the stored control record in force (Open) and, in
// shared mode, starts reading it every ControlPoll. A stored change the
// configuration file has changed since is dropped (the file wins), with a
// log line; a record that does not decode is an error.
func (c *Coordinator) openControl() error {
	ct := c.ctl
	c.met.reg.MustRegister(controlMetrics{c})
	ct.mu.Lock()
	rec, err := ct.store.load(context.Background(), -1)
	if err != nil && !errors.Is(err, errCorruptControl) {
		ct.mu.Unlock()
		return fmt.Errorf("coordinator: reading the control record: %w", err)
	}
	if rec != nil {
		for l, keys := range rec.Told {
			for _, k := range keys {
				ct.tell(l, string(k))
			}
		}
		rec.Told = nil
		file := ct.own
		if ct.store.shared() {
			file = layered(ct.own, rec.File) // what the others run (shareFile below puts this one's in force)
		}
		for _, d := range rebase(&file, rec) {
			c.log.Warn("coordinator: control: the stored run-time change of " + d + " is dropped: the configuration file wins")
		}
		rec.prune(c.opts.Clock.Now())
		rec = c.usableControl(rec, err, file)
		if err := c.installControl(*rec, file); err != nil {
			ct.mu.Unlock()
			return err
		}
		if len(rec.Limits)+len(rec.Pauses) > 0 {
			c.log.Info(fmt.Sprintf("coordinator: control: %d run-time limit changes and %d pauses from the store in force (generation %d)", len(rec.Limits), len(rec.Pauses), rec.Gen),
				"generation", rec.Gen, "limits", len(rec.Limits), "pauses", len(rec.Pauses))
		}
	}
	shared := ct.store.shared()
	ct.mu.Unlock()
	if !shared {
		close(c.ctlDone)
		return nil
	}
	if err := c.shareFile(context.Background()); err != nil {
		close(c.ctlDone)
		return err
	}
	go c.pollControl()
	return nil
}

// pollControl adopts, every ControlPoll until Close, the control record
// other coordinators of the shared store changed.
func (c *Coordinator) pollControl() {
	defer close(c.ctlDone)
	t := time.NewTicker(ControlPoll)
	defer t.Stop()
	failing := 0 // polls failed in a row
	for {
		select {
		case <-c.ctlStop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), ControlPoll)
		c.ctl.mu.Lock()
		err := c.pullControl(ctx)
		c.ctl.mu.Unlock()
		cancel()
		// Once per run of failures, and once when it reads again: it
		// logged every poll (9 lines in 9 s of a Redis outage, besides the
		// store's own one).
		switch {
		case err != nil && failing == 0:
			c.log.Warn("coordinator: control: reading the control record: "+err.Error()+" (logged once, until it reads again)", "error", err.Error())
		case err == nil && failing > 0:
			c.log.Info("coordinator: control: the control record reads again", "failed_polls", failing)
		}
		if err != nil {
			failing++
		} else {
			failing = 0
		}
	}
}
