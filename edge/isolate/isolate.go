package isolate

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/edgelimit/edgelimit/wasm/abi"
	"github.com/edgelimit/edgelimit/wasm/core"
	"github.com/edgelimit/edgelimit/wasm/wire"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// ErrTrap marks an error caused by a trap inside the module; the isolate
// restarted after it.
var ErrTrap = errors.New("isolate: module trapped")

// Decision is the outcome of a decision: the system's one decision type,
// wire.Result, as the module's result buffer carries it (package abi).
type Decision = wire.Result

// Check is one (limiter, key, cost) of a multi-limiter decision.
type Check struct {
	Limiter int
	Key     string
	Cost    int64
}

// Isolate is one instance of the module with its own linear memory. It is
// not safe for concurrent use (an isolate is single-threaded).
type Isolate struct {
	rt       *Runtime
	cfg      wire.Config
	baseID   string
	restarts int
	seed     uint64

	mod                     api.Module
	mem                     api.Memory
	decide, decideMulti     api.Function
	reset, syncOut, syncIn  api.Function
	stats, configure, ioBuf api.Function
	ioPtr, reincarnate      api.Function
	observe, release, admit api.Function
	amend                   api.Function // nil: a module without amendments
	clockOffset             api.Function // nil: a module without el_clock_offset
	withdraw                api.Function // nil: a module without el_withdraw
	recall                  api.Function // nil: a module without el_recall
	offsetOf                func() int64 // the host's clock offset (FollowOffset); nil: not followed
	told                    int64        // the offset the module was last told (a new instance: 0)
	ending                  bool         // Release was called and SyncOut has not yet come back empty
	keyBuf, resBuf          uint32
	stack                   [4]uint64
	multi                   []byte
}

// NewIsolate instantiates an isolate and configures it with cfg. seed feeds
// the module's random source (WASI random_get), so runs are reproducible.
// An isolate with an id and no cfg.IsolateSecret gets a new one (NewSecret);
// restarts and Reincarnate always take a new one.
func (r *Runtime) NewIsolate(ctx context.Context, cfg wire.Config, seed uint64) (*Isolate, error) {
	if cfg.Version == 0 {
		cfg.Version = wire.Version
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("isolate: %w", err)
	}
	if cfg.IsolateID != "" && cfg.IsolateSecret == "" {
		cfg.IsolateSecret = NewSecret()
	}
	i := &Isolate{rt: r, cfg: cfg, baseID: cfg.IsolateID, seed: seed}
	if err := i.start(ctx); err != nil {
		return nil, err
	}
	return i, nil
}

func (i *Isolate) start(ctx context.Context) error {
	mc := wazero.NewModuleConfig().WithName("").WithStartFunctions("_initialize").
		WithRandSource(rand.NewChaCha8(seedBytes(i.seed + uint64(i.restarts))))
	mod, err := i.rt.rt.InstantiateModule(ctx, i.rt.compiled, mc)
	if err != nil {
		return fmt.Errorf("isolate: instantiate: %w", err)
	}
	i.mod, i.mem = mod, mod.Memory()
	get := func(name string) api.Function {
		f := mod.ExportedFunction(name)
		if f == nil && err == nil {
			err = fmt.Errorf("isolate: module does not export %s", name)
		}
		return f
	}
	i.decide, i.decideMulti, i.reset = get("el_decide"), get("el_decide_multi"), get("el_reset")
	i.syncOut, i.syncIn, i.stats = get("el_sync_out"), get("el_sync_in"), get("el_stats")
	i.configure, i.ioBuf, i.ioPtr = get("el_configure"), get("el_io_buf"), get("el_io_ptr")
	i.reincarnate, i.observe, i.release = get("el_reincarnate"), get("el_observe"), get("el_release")
	i.admit = get("el_admit")
	i.amend = mod.ExportedFunction("el_amend") // optional: older modules have none
	i.clockOffset = mod.ExportedFunction("el_clock_offset")
	i.withdraw = mod.ExportedFunction("el_withdraw")
	i.recall = mod.ExportedFunction("el_recall")
	i.told = 0 // a new instance runs at offset 0 until told
	kb, rb := get("el_key_buf"), get("el_result_buf")
	if err != nil {
		mod.Close(ctx)
		return err
	}
	if i.keyBuf, err = i.call32(ctx, kb); err == nil {
		i.resBuf, err = i.call32(ctx, rb)
	}
	if err != nil {
		mod.Close(ctx)
		return fmt.Errorf("isolate: %w", err)
	}
	cfg := i.cfg
	if i.restarts > 0 && cfg.IsolateID != "" {
		cfg.IsolateID = i.baseID + "/r" + strconv.Itoa(i.restarts)
		cfg.IsolateSecret = NewSecret()
	}
	if err := i.writeIO(ctx, cfg.AppendMsg(nil)); err != nil {
		mod.Close(ctx)
		return err
	}
	i.stack[0] = uint64(len(cfg.AppendMsg(nil)))
	if err := i.configure.CallWithStack(ctx, i.stack[:]); err != nil {
		mod.Close(ctx)
		return fmt.Errorf("isolate: configure: %w", err)
	}
	if c := int32(i.stack[0]); c < 0 {
		mod.Close(ctx)
		return fmt.Errorf("isolate: configure: %w", core.ErrorForCode(c))
	}
	i.cfg.IsolateID, i.cfg.IsolateSecret = cfg.IsolateID, cfg.IsolateSecret
	return nil
}

func seedBytes(s uint64) [32]byte {
	var b [32]byte
	binary.LittleEndian.PutUint64(b[:], s)
	return b
}

func (i *Isolate) call32(ctx context.Context, f api.Function) (uint32, error) {
	if err := f.CallWithStack(ctx, i.stack[:]); err != nil {
		return 0, err
	}
	return uint32(i.stack[0]), nil
}

// trapped restarts the isolate after a trap and returns the error to report.
func (i *Isolate) trapped(ctx context.Context, op string, err error) error {
	i.mod.Close(ctx)
	i.restarts++
	if rerr := i.start(ctx); rerr != nil {
		return fmt.Errorf("isolate: %s: %w: %v; restart failed: %w", op, ErrTrap, err, rerr)
	}
	return fmt.Errorf("isolate: %s: %w (restarted as %q): %v", op, ErrTrap, i.cfg.IsolateID, err)
}

// ID returns the isolate id the module puts in its sync batches (it changes
// on Reincarnate, and on a restart after a trap).
func (i *Isolate) ID() string { return i.cfg.IsolateID }

// Config returns the isolate's configuration.
func (i *Isolate) Config() wire.Config { return i.cfg }

// LimiterIndex returns the index of the named limiter, or -1.
func (i *Isolate) LimiterIndex(name string) int {
	for j := range i.cfg.Limiters {
		if i.cfg.Limiters[j].Name == name {
			return j
		}
	}
	return -1
}

// Decide decides (limiter, key, cost) at now (ns) through the scalar fast
// path. It allocates nothing unless it fails.
func (i *Isolate) Decide(ctx context.Context, limiter int, key string, cost, now int64) (Decision, error) {
	if len(key) > wire.MaxKeyLen {
		return Decision{}, fmt.Errorf("isolate: decide: %w", core.ErrKeyTooLong)
	}
	i.mem.WriteString(i.keyBuf, key) // in range: the buffer holds abi.KeyBufSize bytes
	return i.decideKey(ctx, limiter, len(key), cost, now)
}

// DecideBytes is Decide with the key as bytes.
func (i *Isolate) DecideBytes(ctx context.Context, limiter int, key []byte, cost, now int64) (Decision, error) {
	if len(key) > wire.MaxKeyLen {
		return Decision{}, fmt.Errorf("isolate: decide: %w", core.ErrKeyTooLong)
	}
	i.mem.Write(i.keyBuf, key)
	return i.decideKey(ctx, limiter, len(key), cost, now)
}

// decideKey decides for the key of n bytes already in the key buffer.
func (i *Isolate) decideKey(ctx context.Context, limiter, n int, cost, now int64) (Decision, error) {
	if err := i.follow(ctx); err != nil {
		return Decision{}, err
	}
	i.stack[0], i.stack[1], i.stack[2], i.stack[3] = uint64(uint32(limiter)), uint64(n), uint64(cost), uint64(now)
	return i.finish(ctx, "decide", i.decide)
}

// DecideMulti checks several limiters together, all or nothing.
func (i *Isolate) DecideMulti(ctx context.Context, checks []Check, now int64) (Decision, error) {
	if len(checks) == 0 || len(checks) > wire.MaxChecks {
		return Decision{}, fmt.Errorf("isolate: decide: %w", core.ErrTooManyChecks)
	}
	b := i.multi[:0]
	for _, c := range checks {
		if len(c.Key) > wire.MaxKeyLen {
			return Decision{}, fmt.Errorf("isolate: decide: %w", core.ErrKeyTooLong)
		}
		b = binary.LittleEndian.AppendUint32(b, uint32(c.Limiter))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(c.Key)))
		b = binary.LittleEndian.AppendUint64(b, uint64(c.Cost))
		b = append(b, c.Key...)
	}
	i.multi = b
	if err := i.follow(ctx); err != nil {
		return Decision{}, err
	}
	if !i.mem.Write(i.keyBuf, b) {
		return Decision{}, fmt.Errorf("isolate: decide: key buffer out of range")
	}
	i.stack[0], i.stack[1] = uint64(len(checks)), uint64(now)
	return i.finish(ctx, "decide", i.decideMulti)
}

func (i *Isolate) finish(ctx context.Context, op string, f api.Function) (Decision, error) {
	if err := f.CallWithStack(ctx, i.stack[:]); err != nil {
		return Decision{}, i.trapped(ctx, op, err)
	}
	if c := int32(i.stack[0]); c < 0 {
		return Decision{}, fmt.Errorf("isolate: %s: %w", op, core.ErrorForCode(c))
	}
	res, ok := i.mem.Read(i.resBuf, abi.ResultBytes)
	if !ok {
		return Decision{}, fmt.Errorf("isolate: %s: result buffer out of range", op)
	}
	return abi.ReadResult(res), nil
}

// Reset forgets the isolate's local state of (limiter, key).
func (i *Isolate) Reset(ctx context.Context, limiter int, key string) error {
	if len(key) > wire.MaxKeyLen {
		return fmt.Errorf("isolate: reset: %w", core.ErrKeyTooLong)
	}
	i.mem.WriteString(i.keyBuf, key)
	i.stack[0], i.stack[1] = uint64(uint32(limiter)), uint64(len(key))
	return i.status(ctx, "reset", i.reset)
}

func (i *Isolate) status(ctx context.Context, op string, f api.Function) error {
	if err := f.CallWithStack(ctx, i.stack[:]); err != nil {
		return i.trapped(ctx, op, err)
	}
	if c := int32(i.stack[0]); c < 0 {
		return fmt.Errorf("isolate: %s: %w", op, core.ErrorForCode(c))
	}
	return nil
}

// SyncOut returns the batch to send to the coordinator (msgpack
// wire.Batch), appended to dst, or dst unchanged when there is nothing to
// sync. While a batch is unanswered it returns that batch again.
func (i *Isolate) SyncOut(ctx context.Context, now int64, dst []byte) ([]byte, error) {
	if err := i.follow(ctx); err != nil {
		return dst, err
	}
	i.stack[0] = uint64(now)
	if err := i.syncOut.CallWithStack(ctx, i.stack[:]); err != nil {
		return dst, i.trapped(ctx, "sync out", err)
	}
	n := int32(i.stack[0])
	if n < 0 {
		return dst, fmt.Errorf("isolate: sync out: %w", core.ErrorForCode(n))
	}
	if n == 0 {
		i.ending = false // nothing left to report: a graceful stop is done
	}
	return i.readIO(ctx, dst, n)
}

// Amend returns the outstanding batch amended with the asks of the
// requests held since it was cut (wire/amend.go; core.Core.Amend), appended
// to dst, or dst unchanged when there is none to send (nothing new to ask,
// no batch in flight, or a module without amendments). The host sends it
// at once and takes its reply in place of the batch's.
func (i *Isolate) Amend(ctx context.Context, now int64, dst []byte) ([]byte, error) {
	if i.amend == nil {
		return dst, nil
	}
	if err := i.follow(ctx); err != nil {
		return dst, err
	}
	i.stack[0] = uint64(now)
	if err := i.amend.CallWithStack(ctx, i.stack[:]); err != nil {
		return dst, i.trapped(ctx, "amend", err)
	}
	n := int32(i.stack[0])
	if n < 0 {
		return dst, fmt.Errorf("isolate: amend: %w", core.ErrorForCode(n))
	}
	if n == 0 {
		return dst, nil
	}
	return i.readIO(ctx, dst, n)
}

// SyncIn applies the coordinator's reply (msgpack wire.Reply) at now (ns).
func (i *Isolate) SyncIn(ctx context.Context, reply []byte, now int64) error {
	if err := i.follow(ctx); err != nil {
		return err
	}
	if err := i.writeIO(ctx, reply); err != nil {
		return err
	}
	i.stack[0], i.stack[1] = uint64(len(reply)), uint64(now)
	return i.status(ctx, "sync in", i.syncIn)
}

// Reincarnate starts a new incarnation of the isolate, for when the
// coordinator refused its batch's sequence number (HTTP 409 seq_stale,
// seq_gap or seq_conflict; syncloop.ErrSequence): the module takes a new
// isolate id (the configured id, '~' and 12 random hex digits; see ID) and
// a new secret (NewSecret),
// restarts its sequence numbers at 1 and makes its outstanding batch batch
// 1 of the new id, so the next SyncOut resends the same deltas.
func (i *Isolate) Reincarnate(ctx context.Context) error {
	if i.cfg.IsolateID == "" {
		return fmt.Errorf("isolate: reincarnate: %w", core.ErrNoIsolateID)
	}
	id, secret := incarnationID(i.baseID, rand.Uint64()), NewSecret()
	if err := i.writeIO(ctx, []byte(id+secret)); err != nil {
		return err
	}
	i.stack[0], i.stack[1] = uint64(len(id)), uint64(len(secret))
	if err := i.status(ctx, "reincarnate", i.reincarnate); err != nil {
		return err
	}
	i.cfg.IsolateID, i.cfg.IsolateSecret = id, secret
	return nil
}

// Withdraw tells the module that the host denies for good the request its
// last decision answered SyncRetry (its retries are used up): the asks
// that decision recorded and no batch carried yet are taken back, so no
// lease is granted for a request gone (core.Core.Withdraw). Call it right
// after that decision, before any other. A module without el_withdraw
// does nothing.
func (i *Isolate) Withdraw(ctx context.Context) error {
	if i.withdraw == nil {
		return nil
	}
	return i.status(ctx, "withdraw", i.withdraw)
}

// Recall takes the outstanding batch back after the coordinator refused it
// for its times (HTTP 400 clock_skew: the isolate's clock, or the one its
// batch was cut on, is ahead of the coordinator's by more than its allowed
// skew) and applied nothing of it, so that the next SyncOut cuts it again
// at the host's time (core.Core.Recall). It tells the module the host's
// clock offset first (FollowOffset), which moves the windows of the cost
// admitted before a step (wasm/core retime.go). now is the host's time
// (ns). It reports whether a batch was taken back: false when none was
// outstanding, it was amended (Amend: an amendment may have been applied;
// see RecallAmended), or for a module without el_recall (the batch is then
// resent as it was). It makes *Isolate a syncloop.Recaller.
func (i *Isolate) Recall(ctx context.Context, now int64) (bool, error) {
	return i.RecallAmended(ctx, now, false)
}

// RecallAmended is Recall for a host that amends batches: amendsRefused
// says that every amendment of the batch was answered, each refused for
// its times too, so that an amended batch is taken back as well.
func (i *Isolate) RecallAmended(ctx context.Context, now int64, amendsRefused bool) (bool, error) {
	if i.recall == nil {
		return false, nil
	}
	if err := i.follow(ctx); err != nil {
		return false, err
	}
	i.stack[0], i.stack[1] = uint64(now), 0
	if amendsRefused {
		i.stack[1] = 1
	}
	if err := i.status(ctx, "recall", i.recall); err != nil {
		return false, err
	}
	return int32(i.stack[0]) == 1, nil
}

// Release starts a graceful stop: the next SyncOut calls cut batches that
// report every key holding a lease, the last of them (wire.Batch.End)
// giving all leases back to the coordinator. Sync until SyncOut returns
// nothing, then close the isolate.
func (i *Isolate) Release(ctx context.Context) error {
	if err := i.status(ctx, "release", i.release); err != nil {
		return err
	}
	i.ending = true
	return nil
}

// Ending reports whether a graceful stop (Release) still has a batch to
// send: the one in flight, or the last one, not yet cut.
func (i *Isolate) Ending() bool { return i.ending }

// incarnationID returns base with an incarnation suffix ('~' and 12 hex
// digits of r), base cut so that the id fits wire.MaxIsolateIDLen. The
// suffix is random rather than counted so that a host restarted with the
// same configured id does not walk through its previous life's ids.
func incarnationID(base string, r uint64) string {
	const suffix = 13
	if len(base) > wire.MaxIsolateIDLen-suffix {
		base = base[:wire.MaxIsolateIDLen-suffix]
	}
	return base + "~" + fmt.Sprintf("%012x", r&(1<<48-1))
}

// Stats returns the isolate's counters.
func (i *Isolate) Stats(ctx context.Context) (wire.Stats, error) {
	var s wire.Stats
	if err := i.stats.CallWithStack(ctx, i.stack[:]); err != nil {
		return s, i.trapped(ctx, "stats", err)
	}
	b, err := i.readIO(ctx, nil, int32(i.stack[0]))
	if err != nil {
		return s, err
	}
	if err := s.UnmarshalMsg(b); err != nil {
		return s, fmt.Errorf("isolate: stats: %w", err)
	}
	return s, nil
}

// MemoryBytes returns the size of the isolate's linear memory, in bytes.
func (i *Isolate) MemoryBytes() uint32 { return i.mem.Size() }

// Restarts returns how often the isolate restarted after a trap.
func (i *Isolate) Restarts() int { return i.restarts }

// Close releases the isolate.
func (i *Isolate) Close(ctx context.Context) error {
	if err := i.mod.Close(ctx); err != nil {
		return fmt.Errorf("isolate: close: %w", err)
	}
	return nil
}

func (i *Isolate) writeIO(ctx context.Context, b []byte) error {
	i.stack[0] = uint64(len(b))
	if err := i.ioBuf.CallWithStack(ctx, i.stack[:]); err != nil {
		return i.trapped(ctx, "io buffer", err)
	}
	ptr := uint32(i.stack[0])
	if ptr == 0 {
		return fmt.Errorf("isolate: io buffer: %d bytes is too large", len(b))
	}
	if !i.mem.Write(ptr, b) {
		return fmt.Errorf("isolate: io buffer out of range")
	}
	return nil
}

func (i *Isolate) readIO(ctx context.Context, dst []byte, n int32) ([]byte, error) {
	if n == 0 {
		return dst, nil
	}
	if err := i.ioPtr.CallWithStack(ctx, i.stack[:]); err != nil {
		return dst, i.trapped(ctx, "io buffer", err)
	}
	b, ok := i.mem.Read(uint32(i.stack[0]), uint32(n))
	if !ok {
		return dst, fmt.Errorf("isolate: io buffer out of range")
	}
	return append(dst, b...), nil
}

// CallExtism calls one of the module's Extism-style exports (configure,
// decide, sync_out, sync_in, stats, reset) with msgpack input through this
// package's Extism kernel, and returns its output. A guest error (set with
// the Extism error channel) is returned as an error. Configuring through it
// replaces the isolate's core but not Config().
func (i *Isolate) CallExtism(ctx context.Context, name string, input []byte) ([]byte, error) {
	f := i.mod.ExportedFunction(name)
	if f == nil {
		return nil, fmt.Errorf("isolate: module does not export %q", name)
	}
	k := &kernel{input: input, blocks: map[uint64]uint64{}}
	res, err := f.Call(context.WithValue(ctx, kernelKey{}, k))
	if err != nil {
		return nil, i.trapped(ctx, name, err)
	}
	if k.failed || (len(res) > 0 && res[0] != 0) {
		return nil, fmt.Errorf("isolate: %s: %s", name, k.err)
	}
	return k.output, nil
}
