package wire

import (
	"errors"
	"strconv"
)

// Batch is what an isolate's sync_out produces and the coordinator applies:
// the cost each key consumed since the previous batch. (Isolate, Seq)
// identifies it; the coordinator applies a batch at most once, so a retry
// resends the same Seq.
type Batch struct {
	Version int64  `msgpack:"v"`
	Isolate string `msgpack:"iso"` // isolate id, 1..MaxIsolateIDLen bytes
	// Secret is the incarnation's secret (Config.IsolateSecret),
	// MinSecretLen to MaxSecretLen bytes, or empty (none). The
	// coordinator binds the isolate id to it with the id's first batch
	// (keeping a hash) and refuses, without telling sequence numbers, a
	// later batch for the id that does not carry the same secret, so a
	// client that knows an isolate id cannot take it over or force it to
	// reincarnate. Encoded only when set.
	Secret string `msgpack:"sec,omitempty"`
	// Prev and PrevSecret name the incarnation this one succeeds (the
	// id and secret it had before its host called el_reincarnate) while
	// the leases it held under that id are handed over: its first
	// batches carry them until one cut after the reincarnation, naming
	// every key it holds a lease on, is answered. The coordinator checks
	// PrevSecret against the secret Prev's batches were bound to and
	// then moves Prev's lease on each of the batch's keys to this id,
	// where the isolate goes on spending it (see coordinator/merge,
	// handover.go); without a match they stay Prev's. Both set, or
	// neither; Prev differs from Isolate. Encoded only when set.
	Prev       string  `msgpack:"pv,omitempty"`
	PrevSecret string  `msgpack:"pvs,omitempty"`
	Seq        int64   `msgpack:"seq"`         // 1, 2, 3... per isolate; a retry reuses the number
	At         int64   `msgpack:"at"`          // isolate time when the batch was cut, ns
	Entries    []Delta `msgpack:"e,omitempty"` // at most MaxBatchEntries
	// Signals: what the isolate learnt of keys' upstreams since its
	// previous batch (upstream.go); at most MaxBatchEntries. Encoded only
	// when there are some.
	Signals []Signal `msgpack:"up,omitempty"`
	// End: the isolate's last batch (a graceful stop). After applying it
	// the coordinator gives back every lease and standing lease the
	// isolate holds on the batch's keys; the isolate admits nothing more
	// under them. Encoded only when true.
	End bool `msgpack:"end,omitempty"`
	// ResetGen is the reset generation of the last reply the isolate
	// applied (Reply.ResetGen; 0: none yet), so the coordinator tells it
	// of the resets made since (resets.go). Encoded only when > 0.
	ResetGen int64 `msgpack:"rg,omitempty"`
	// Limits: the isolate reads View.Limit, so the coordinator sends its
	// own limit for each key (a module that does not send it reads views
	// of at most 11 elements). Encoded only when true.
	Limits bool `msgpack:"lim,omitempty"`
	// Spans: the isolate reads View.StandTo, so the coordinator may give
	// it a standing lease over several windows (a module that does not
	// send it reads views of at most 13 elements, and stands only in the
	// window after the view's). Encoded only when true.
	Spans bool `msgpack:"sp,omitempty"`
	// Pace: the isolate reads View.Pace, so the coordinator sends the
	// other isolates' pace on leased windowed keys (a module that does
	// not send it reads views of at most 14 elements). Encoded only when
	// true.
	Pace bool `msgpack:"pc,omitempty"`
	// Denials: the cost each key's requests were refused for good (a
	// final denial: not one answered SyncRetry, which the host decides
	// again) since the isolate's previous batch; at most MaxBatchEntries.
	// Encoded when not nil, even empty: a module that reports them says
	// so, and the coordinator counts its denials from them, not from
	// Demand - Delta (see EachDenial). The decoder leaves it nil when the
	// batch has no "dn".
	Denials []Denial `msgpack:"dn,omitempty"`
	// Asks make the batch an amendment (amend.go): for each key whose
	// requests were held for want of a lease since the batch was cut, the
	// cost the isolate needs in the window from the cut on (admitted
	// since, plus held); at most MaxBatchEntries. Not part of the batch's
	// content (a retry with asks is still a retry). Encoded only when
	// there are some.
	Asks []Ask `msgpack:"ak,omitempty"`
}

// BatchID is who cut a batch: its isolate id and secret (Batch.Isolate,
// Batch.Secret) and, while it hands over an earlier incarnation's leases,
// that incarnation's (Batch.Prev, Batch.PrevSecret). Empty fields are not
// encoded.
type BatchID struct {
	Isolate, Secret, Prev, PrevSecret string
}

// ReportsDenials reports whether the isolate reports its final denials
// (Denials is not nil).
func (b *Batch) ReportsDenials() bool { return b.Denials != nil }

// KeyCost is a cost of one key in one window, encoded as the array
// [limiter, key, window, cost]: a batch's final denials (Denial) and its
// amendment's asks (Ask).
type KeyCost struct {
	//lint:ignore U1000 read by msgpack/v5 (reflection): encode as an array
	_msgpack struct{} `msgpack:",as_array"`
	Limiter  string
	Key      string
	Window   int64 // window index (time / period); 0 for bucket algorithms
	Cost     int64 // cost refused (a denial) or asked for (an ask), >= 1
}

// Denial is the cost of one key's final denials in one window.
type Denial = KeyCost

// AppendKeyCost appends one KeyCost [limiter, key, window, cost] (the guest
// encodes its stored key bytes without converting them).
func AppendKeyCost[K string | []byte](dst []byte, limiter string, key K, window, cost int64) []byte {
	dst = AppendArrayHeader(dst, 4)
	dst = AppendString(dst, limiter)
	dst = AppendString(dst, key)
	dst = AppendInt(dst, window)
	return AppendInt(dst, cost)
}

// EachDenial calls fn with the cost of each key's requests that b says
// were refused: its Denials when the isolate reports them
// (ReportsDenials), else, for an older module, what each entry asked for
// and did not admit (Demand - Delta: a request held for a lease and
// admitted after a sync counts there too, and a denial decided without a
// sync not at all).
func (b *Batch) EachDenial(fn func(limiter, key string, window, cost int64)) {
	if b.ReportsDenials() {
		for i := range b.Denials {
			d := &b.Denials[i]
			fn(d.Limiter, d.Key, d.Window, d.Cost)
		}
		return
	}
	for i := range b.Entries {
		e := &b.Entries[i]
		if c := e.Demand - e.Delta; c > 0 {
			fn(e.Limiter, e.Key, e.Window, c)
		}
	}
}

// Delta is the consumption of one key in one window, encoded as the array
// [limiter, key, window, delta, demand].
type Delta struct {
	//lint:ignore U1000 read by msgpack/v5 (reflection): encode as an array
	_msgpack struct{} `msgpack:",as_array"`
	Limiter  string
	Key      string
	Window   int64 // window index (time / period); 0 for bucket algorithms
	Delta    int64 // cost admitted, >= 0
	Demand   int64 // cost asked for, admitted or not, >= 0 (sizes strict leases)
}

// Reply is the coordinator's answer to a Batch: the global view of every key
// in the batch after it was applied.
type Reply struct {
	Version int64  `msgpack:"v"`
	Seq     int64  `msgpack:"seq"`         // the Seq of the batch this answers
	At      int64  `msgpack:"at"`          // coordinator time of the view, ns
	Entries []View `msgpack:"e,omitempty"` // at most MaxBatchEntries
	// Upstream: the upstream state of the batch's keys that have some
	// (a pause, a circuit not closed, an announced limit) and of the keys
	// of its Signals; at most MaxBatchEntries. Encoded only when there
	// are some.
	Upstream []UpView `msgpack:"up,omitempty"`
	// ResetGen is the coordinator's reset generation after this reply
	// (resets.go): the isolate sends it back in its next batch. 0: a
	// coordinator without reset notices. Encoded only when not 0.
	ResetGen int64 `msgpack:"rg,omitempty"`
	// Resets names the keys reset at the coordinator since the batch's
	// ResetGen (at most MaxBatchEntries); the isolate drops what it
	// cached of them. Encoded only when there are some.
	Resets []ResetKey `msgpack:"rs,omitempty"`
	// ResetAll: the coordinator cannot list the resets since the batch's
	// ResetGen (it restarted, or too many since); the isolate drops its
	// dry spells and the limits it adopted from the fleet. Encoded only
	// when true.
	ResetAll bool `msgpack:"ra,omitempty"`
	// Paused: the limiters paused as a whole while this reply was made
	// (pause.go), at most MaxLimiters. Encoded only when there are some.
	Paused []LimiterPause `msgpack:"lp,omitempty"`
}

// View is the global state of one key, encoded as the array [limiter, key,
// window, count, prev, tat, lease, isolates].
type View struct {
	//lint:ignore U1000 read by msgpack/v5 (reflection): encode as an array
	_msgpack struct{} `msgpack:",as_array"`
	Limiter  string
	Key      string
	Window   int64 // window index of Count; Prev is window-1
	Count    int64 // global cost in Window (windowed algorithms)
	Prev     int64 // global cost in Window-1
	TAT      int64 // bucket algorithms: theoretical arrival time, ns
	Lease    int64 // strict mode: cost this isolate may admit beyond the acknowledged batch; -1 = no lease
	Isolates int64 // isolates that recently reported this key (>= 1)
	// Stand (strict fixed windows): the standing lease, the cost this
	// isolate may admit in window Window+1 without asking (0: none).
	// Optional on the wire: a view of 8 elements has none.
	Stand int64
	// Exhausted (strict windowed): after this reply's grant, every unit
	// of Window's budget is counted or reserved by some isolate, so
	// asking for more is (for now) useless. Optional on the wire: a view
	// of 8 or 9 elements says false.
	Exhausted bool
	// Life (leased limiters): how long, in ns after the batch was cut on
	// the isolate's clock, the isolate may admit under Lease and Stand;
	// past it they are void and the coordinator takes them back. 0: until
	// the window ends (a coordinator without lease lifetimes). Optional on
	// the wire: a view of 8 to 10 elements has 0.
	Life int64
	// Limit is the coordinator's limit for the key (its configuration,
	// per-key overrides applied), sent only to a batch that says
	// Batch.Limits; 0: not sent. An isolate whose configuration says
	// otherwise answers with it (remaining, headers) and decides by it.
	// Optional on the wire: a view of 8 to 11 elements has 0. Not in the
	// msgpack/v5 reflection encoding of View (tag "-": an array-encoded
	// struct has a fixed length there); AppendMsg and ReplyReader carry it.
	Limit int64 `msgpack:"-"`
	// Held (leased windowed limiters): the budget of Window that other
	// isolates have probably admitted and not reported: what they held
	// in leases now expired, which the coordinator counts as spent until
	// the window ends or they report, and of live leases what was granted
	// for held requests and what their pace says they used since they
	// were last heard from. An isolate's remaining (its answers' and
	// peeks') counts it as used.
	// Optional on the wire: a view of 8 to 12 elements has 0. Not in the
	// msgpack/v5 reflection encoding (as Limit).
	Held int64 `msgpack:"-"`
	// StandTo (strict fixed windows, sent only to a batch that says
	// Batch.Spans): the last window Stand stands in; the isolate may
	// admit up to Stand in each window from Window+1 through StandTo (in
	// each one it has not asked in) without asking, within Life. 0: only
	// Window+1. Optional on the wire: a view of 8 to 13 elements has 0.
	// Not in the msgpack/v5 reflection encoding (as Limit).
	StandTo int64 `msgpack:"-"`
	// Pace (leased windowed limiters, sent only to a batch that says
	// Batch.Pace): the cost per period the other isolates are expected to
	// admit, from the demand they reported, in cost units per Window's
	// length (rounded). An isolate's remaining counts what it implies for
	// the time since the view was made (the others' admissions the view
	// cannot show yet) as used. 0: none known. Optional on the wire: a
	// view of 8 to 14 elements has 0. Not in the msgpack/v5 reflection
	// encoding (as Limit).
	Pace int64 `msgpack:"-"`
}

// Capabilities of a module, as AppendBatchHeader takes them: what the
// isolate reads of a reply (Batch.Limits, Batch.Spans).
const (
	// CapLimits is Batch.Limits.
	CapLimits uint8 = 1 << iota
	// CapSpans is Batch.Spans.
	CapSpans
	// CapPace is Batch.Pace.
	CapPace
)

// AppendMsg appends b encoded as msgpack.
func (b *Batch) AppendMsg(dst []byte) []byte {
	var up []byte
	if len(b.Signals) > 0 {
		up = AppendArrayHeader(nil, len(b.Signals))
		for i := range b.Signals {
			up = b.Signals[i].AppendMsg(up)
		}
	}
	var dn []byte
	if b.ReportsDenials() {
		dn = AppendArrayHeader(nil, len(b.Denials))
		for i := range b.Denials {
			d := &b.Denials[i]
			dn = AppendKeyCost(dn, d.Limiter, d.Key, d.Window, d.Cost)
		}
	}
	var ak []byte
	if len(b.Asks) > 0 {
		ak = AppendArrayHeader(nil, len(b.Asks))
		for i := range b.Asks {
			d := &b.Asks[i]
			ak = AppendKeyCost(ak, d.Limiter, d.Key, d.Window, d.Cost)
		}
	}
	var caps uint8
	if b.Limits {
		caps |= CapLimits
	}
	if b.Spans {
		caps |= CapSpans
	}
	if b.Pace {
		caps |= CapPace
	}
	id := BatchID{Isolate: b.Isolate, Secret: b.Secret, Prev: b.Prev, PrevSecret: b.PrevSecret}
	dst = AppendBatchHeader(dst, b.Version, id, b.Seq, b.At, up, dn, ak, b.End, b.ResetGen, caps, len(b.Entries))
	for i := range b.Entries {
		dst = b.Entries[i].AppendMsg(dst)
	}
	return dst
}

// AppendBatchHeader appends a batch's map up to and including the header
// of its entries array of n entries; n encoded entries (AppendDelta) must
// follow. up is the encoded array of the batch's signals (AppendSignal
// after an array header), nil when there are none. With Batch.AppendMsg it
// is the one encoding of a batch; the guest uses it to encode without
// building a Batch (no allocation). end marks the isolate's last batch
// (Batch.End); rg is Batch.ResetGen (written when > 0); id is who cut
// it (its secret and predecessor written when set); caps says what the isolate reads
// (CapLimits: Batch.Limits, CapSpans: Batch.Spans, CapPace: Batch.Pace,
// each written when set);
// dn is the encoded array of the batch's denials (AppendKeyCost after an
// array header; Batch.Denials), nil when the isolate does not report them;
// ak the encoded array of its asks (Batch.Asks), nil or empty for none.
func AppendBatchHeader(dst []byte, version int64, id BatchID, seq, at int64, up, dn, ak []byte, end bool, rg int64, caps uint8, n int) []byte {
	lim, sp, pc := caps&CapLimits != 0, caps&CapSpans != 0, caps&CapPace != 0
	isolate, secret := id.Isolate, id.Secret
	fields := 5
	if id.Prev != "" {
		fields += 2
	}
	if dn != nil {
		fields++
	}
	if len(ak) > 0 {
		fields++
	}
	if secret != "" {
		fields++
	}
	if lim {
		fields++
	}
	if sp {
		fields++
	}
	if pc {
		fields++
	}
	if len(up) > 0 {
		fields++
	}
	if end {
		fields++
	}
	if rg > 0 {
		fields++
	}
	dst = AppendMapHeader(dst, fields)
	if secret != "" {
		dst = AppendString(dst, "sec")
		dst = AppendString(dst, secret)
	}
	if id.Prev != "" {
		dst = AppendString(dst, "pv")
		dst = AppendString(dst, id.Prev)
		dst = AppendString(dst, "pvs")
		dst = AppendString(dst, id.PrevSecret)
	}
	if lim {
		dst = AppendString(dst, "lim")
		dst = AppendBool(dst, true)
	}
	if sp {
		dst = AppendString(dst, "sp")
		dst = AppendBool(dst, true)
	}
	if pc {
		dst = AppendString(dst, "pc")
		dst = AppendBool(dst, true)
	}
	if rg > 0 {
		dst = AppendString(dst, "rg")
		dst = AppendInt(dst, rg)
	}
	if len(up) > 0 {
		dst = AppendString(dst, "up")
		dst = append(dst, up...)
	}
	if dn != nil {
		dst = AppendString(dst, "dn")
		dst = append(dst, dn...)
	}
	if len(ak) > 0 {
		dst = AppendString(dst, "ak")
		dst = append(dst, ak...)
	}
	if end {
		dst = AppendString(dst, "end")
		dst = AppendBool(dst, true)
	}
	dst = AppendString(dst, "v")
	dst = AppendInt(dst, version)
	dst = AppendString(dst, "iso")
	dst = AppendString(dst, isolate)
	dst = AppendString(dst, "seq")
	dst = AppendInt(dst, seq)
	dst = AppendString(dst, "at")
	dst = AppendInt(dst, at)
	dst = AppendString(dst, "e")
	return AppendArrayHeader(dst, n)
}

// AppendMsg appends d as the array [limiter, key, window, delta, demand].
func (d *Delta) AppendMsg(dst []byte) []byte {
	return AppendDelta(dst, d.Limiter, d.Key, d.Window, d.Delta, d.Demand)
}

// AppendDelta appends one batch entry [limiter, key, window, delta, demand].
// key is a string or a byte slice, so the guest encodes its stored key
// bytes without converting them to a string.
func AppendDelta[K string | []byte](dst []byte, limiter string, key K, window, delta, demand int64) []byte {
	dst = AppendArrayHeader(dst, 5)
	dst = AppendString(dst, limiter)
	dst = AppendString(dst, key)
	dst = AppendInt(dst, window)
	dst = AppendInt(dst, delta)
	return AppendInt(dst, demand)
}

// batchFields are the field names of a batch, each of which a batch may
// give once.
var batchFields = [...]string{"v", "iso", "sec", "pv", "pvs", "seq", "at", "e", "up", "dn", "ak", "end", "rg", "lim", "sp", "pc"}

// UnmarshalMsg decodes and validates a batch (a field given twice is an
// error). On error b holds no partial result that should be applied.
func (b *Batch) UnmarshalMsg(src []byte) error {
	*b = Batch{}
	r := NewReader(src)
	var seen uint64
	for n := r.ReadMapHeader(); n > 0 && r.err == nil; n-- {
		switch f := r.ReadStringBytes(); {
		case r.Repeated(&seen, batchFields[:], f):
		case Equal("v", f):
			b.Version = r.ReadInt()
		case Equal("iso", f):
			b.Isolate = r.ReadString()
		case Equal("sec", f):
			b.Secret = r.ReadString()
		case Equal("pv", f):
			b.Prev = r.ReadString()
		case Equal("pvs", f):
			b.PrevSecret = r.ReadString()
		case Equal("seq", f):
			b.Seq = r.ReadInt()
		case Equal("at", f):
			b.At = r.ReadInt()
		case Equal("e", f):
			m := r.ReadArrayHeader()
			if m > MaxBatchEntries {
				r.SetErr("e", errors.New(strconv.Itoa(m)+" entries, more than "+strconv.Itoa(MaxBatchEntries)))
				break
			}
			if !r.fits(m, 6) { // [limiter, key, window, delta, demand]: 6 bytes at least
				break
			}
			b.Entries = make([]Delta, m)
			for i := 0; i < m && r.err == nil; i++ {
				if r.ReadArrayHeader() != 5 && r.err == nil {
					r.SetErr("e["+strconv.Itoa(i)+"]", errors.New("want [limiter, key, window, delta, demand]"))
					break
				}
				d := &b.Entries[i]
				d.Limiter, d.Key = r.ReadString(), r.ReadString()
				d.Window, d.Delta, d.Demand = r.ReadInt(), r.ReadInt(), r.ReadInt()
			}
		case Equal("up", f):
			b.Signals = readSignals(r)
		case Equal("dn", f):
			b.Denials = readKeyCosts(r, "dn", "denials")
		case Equal("ak", f):
			b.Asks = readKeyCosts(r, "ak", "asks")
		case Equal("end", f):
			b.End = r.ReadBool()
		case Equal("rg", f):
			b.ResetGen = r.ReadInt()
		case Equal("lim", f):
			b.Limits = r.ReadBool()
		case Equal("sp", f):
			b.Spans = r.ReadBool()
		case Equal("pc", f):
			b.Pace = r.ReadBool()
		default:
			r.Skip()
		}
	}
	if err := r.Done(); err != nil {
		return err
	}
	return b.Validate()
}

// Validate checks the fields of a decoded batch.
func (b *Batch) Validate() error {
	switch {
	case b.Version != Version:
		return &FieldError{"v", errors.New("version " + strconv.FormatInt(b.Version, 10) + " is not supported (want " + strconv.Itoa(Version) + ")")}
	case b.Isolate == "" || len(b.Isolate) > MaxIsolateIDLen:
		return &FieldError{"iso", errors.New("isolate id must be 1 to " + strconv.Itoa(MaxIsolateIDLen) + " bytes")}
	case b.Secret != "" && !ValidSecret(b.Secret):
		return &FieldError{"sec", errors.New(errSecretLen)}
	case b.Prev == "" && b.PrevSecret != "":
		return &FieldError{"pvs", errors.New("a predecessor's secret without its id (pv)")}
	case b.Prev != "" && (len(b.Prev) > MaxIsolateIDLen || b.Prev == b.Isolate):
		return &FieldError{"pv", errors.New("the predecessor's id must be 1 to " + strconv.Itoa(MaxIsolateIDLen) + " bytes and not the batch's own")}
	case b.Prev != "" && !ValidSecret(b.PrevSecret):
		return &FieldError{"pvs", errors.New("a predecessor needs its secret: " + errSecretLen)}
	case b.Seq < 1:
		return &FieldError{"seq", errors.New("sequence numbers start at 1")}
	case b.ResetGen < 0:
		return &FieldError{"rg", errors.New("must be >= 0")}
	case len(b.Entries) > MaxBatchEntries:
		return &FieldError{"e", errors.New("more than " + strconv.Itoa(MaxBatchEntries) + " entries")}
	case len(b.Denials) > MaxBatchEntries:
		return &FieldError{"dn", errors.New("more than " + strconv.Itoa(MaxBatchEntries) + " denials")}
	case len(b.Asks) > MaxBatchEntries:
		return &FieldError{"ak", errors.New("more than " + strconv.Itoa(MaxBatchEntries) + " asks")}
	case len(b.Signals) > MaxBatchEntries:
		return &FieldError{"up", errors.New("more than " + strconv.Itoa(MaxBatchEntries) + " signals")}
	}
	if err := validateSignals(b.Signals); err != nil {
		return err
	}
	if err := checkKeyCosts("dn", b.Denials); err != nil {
		return err
	}
	if err := checkKeyCosts("ak", b.Asks); err != nil {
		return err
	}
	for i := range b.Entries {
		d := &b.Entries[i]
		f := "e[" + strconv.Itoa(i) + "]."
		if err := checkKeyWindow(f, d.Limiter, d.Key, d.Window); err != nil {
			return err
		}
		switch {
		case d.Delta < 0 || d.Delta > MaxLimit:
			return &FieldError{f + "delta", errors.New("must be between 0 and 2^50")}
		case d.Demand < 0 || d.Demand > MaxLimit:
			return &FieldError{f + "demand", errors.New("must be between 0 and 2^50")}
		}
	}
	return nil
}

// AppendMsg appends r encoded as msgpack.
func (rp *Reply) AppendMsg(dst []byte) []byte {
	n := 4
	for _, on := range [...]bool{len(rp.Upstream) > 0, rp.ResetGen != 0, len(rp.Resets) > 0, rp.ResetAll, len(rp.Paused) > 0} {
		if on {
			n++
		}
	}
	dst = AppendMapHeader(dst, n)
	if len(rp.Upstream) > 0 {
		dst = AppendString(dst, "up")
		dst = AppendArrayHeader(dst, len(rp.Upstream))
		for i := range rp.Upstream {
			dst = rp.Upstream[i].AppendMsg(dst)
		}
	}
	dst = rp.appendResets(dst)
	if len(rp.Paused) > 0 {
		dst = AppendString(dst, "lp")
		dst = AppendArrayHeader(dst, len(rp.Paused))
		for i := range rp.Paused {
			dst = rp.Paused[i].AppendMsg(dst)
		}
	}
	dst = AppendString(dst, "v")
	dst = AppendInt(dst, rp.Version)
	dst = AppendString(dst, "seq")
	dst = AppendInt(dst, rp.Seq)
	dst = AppendString(dst, "at")
	dst = AppendInt(dst, rp.At)
	dst = AppendString(dst, "e")
	dst = AppendArrayHeader(dst, len(rp.Entries))
	for i := range rp.Entries {
		dst = rp.Entries[i].AppendMsg(dst)
	}
	return dst
}

// Notice reports whether v is a full-window notice (SCHEMA.md): a view of
// a key the batch may not name, whose window counted its limit, told with
// no lease (-1) and exhausted. No other view has both.
func (v *View) Notice() bool { return v.Lease == -1 && v.Exhausted }

// AppendMsg appends v as the array [limiter, key, window, count, prev, tat,
// lease, isolates, stand, exhausted, life(, limit(, held(, standto(,
// pace))))]: each optional element when it or one after it is not 0.
func (v *View) AppendMsg(dst []byte) []byte {
	n := 11
	switch {
	case v.Pace != 0:
		n = 15
	case v.StandTo != 0:
		n = 14
	case v.Held != 0:
		n = 13
	case v.Limit != 0:
		n = 12
	}
	dst = AppendArrayHeader(dst, n)
	dst = AppendString(dst, v.Limiter)
	dst = AppendString(dst, v.Key)
	dst = AppendInt(dst, v.Window)
	dst = AppendInt(dst, v.Count)
	dst = AppendInt(dst, v.Prev)
	dst = AppendInt(dst, v.TAT)
	dst = AppendInt(dst, v.Lease)
	dst = AppendInt(dst, v.Isolates)
	dst = AppendInt(dst, v.Stand)
	dst = AppendBool(dst, v.Exhausted)
	dst = AppendInt(dst, v.Life)
	if n >= 12 {
		dst = AppendInt(dst, v.Limit)
	}
	if n >= 13 {
		dst = AppendInt(dst, v.Held)
	}
	if n >= 14 {
		dst = AppendInt(dst, v.StandTo)
	}
	if n == 15 {
		dst = AppendInt(dst, v.Pace)
	}
	return dst
}

var (
	errViewShape = errors.New("want [limiter, key, window, count, prev, tat, lease, isolates(, stand(, exhausted(, life(, limit(, held(, standto(, pace)))))))]")
	errKeyLen    = errors.New("must be 1 to " + strconv.Itoa(MaxKeyLen) + " bytes")
)

// ReplyReader walks a reply's entries without allocating them all, for the
// guest's sync_in. Use Reset, then Next until it returns false, then Err.
type ReplyReader struct {
	r       Reader
	Version int64
	Seq     int64
	At      int64
	left    int
	eEnd    int // offset just past the entries array
	entries bool
	upStart int // offset of the upstream array; -1 when absent
	// ResetGen and ResetAll are the reply's (Reply.ResetGen, ResetAll).
	ResetGen int64
	ResetAll bool
	rsStart  int // offset of the resets array; -1 when absent
	lpStart  int // offset of the paused limiters array; -1 when absent
}

// Reset starts reading src. The map's fields may come in any order.
func (rr *ReplyReader) Reset(src []byte) error {
	// Field by field: under TinyGo a whole-struct zeroing is a memory.fill.
	rr.Version, rr.Seq, rr.At, rr.left, rr.eEnd, rr.entries, rr.upStart = 0, 0, 0, 0, 0, false, -1
	rr.ResetGen, rr.ResetAll, rr.rsStart, rr.lpStart = 0, false, -1, -1
	rr.r.Reset(src)
	r := &rr.r
	eStart := 0
	for n := r.ReadMapHeader(); n > 0 && r.err == nil; n-- {
		switch f := r.ReadStringBytes(); {
		case Equal("v", f):
			rr.Version = r.ReadInt()
		case Equal("seq", f):
			rr.Seq = r.ReadInt()
		case Equal("at", f):
			rr.At = r.ReadInt()
		case Equal("e", f):
			eStart = r.off
			r.Skip()
			rr.eEnd = r.off
			rr.entries = true
		case Equal("up", f):
			rr.upStart = r.off
			r.Skip()
		case Equal("rg", f):
			rr.ResetGen = r.ReadInt()
		case Equal("ra", f):
			rr.ResetAll = r.ReadBool()
		case Equal("rs", f):
			rr.rsStart = r.off
			r.Skip()
		case Equal("lp", f):
			rr.lpStart = r.off
			r.Skip()
		default:
			r.Skip()
		}
	}
	r.Done()
	if r.err == nil && rr.Version != Version {
		r.SetErr("v", errors.New("version "+strconv.FormatInt(rr.Version, 10)+" is not supported"))
	}
	if r.err == nil && rr.entries {
		r.off = eStart
		rr.left = r.ReadArrayHeader()
		if rr.left > MaxBatchEntries {
			r.SetErr("e", errors.New("more than "+strconv.Itoa(MaxBatchEntries)+" entries"))
		}
	}
	return r.err
}

// Next decodes the next entry into v, with v.Limiter and v.Key left empty and
// their bytes returned instead (valid until the input is reused).
func (rr *ReplyReader) Next(v *View) (limiter, key []byte, ok bool) {
	if rr.left == 0 || rr.r.err != nil {
		return nil, nil, false
	}
	rr.left--
	r := &rr.r
	n := r.ReadArrayHeader()
	if (n < 8 || n > 15) && r.err == nil {
		r.SetErr("e", errViewShape)
		return nil, nil, false
	}
	limiter, key = r.ReadStringBytes(), r.ReadStringBytes()
	v.Window, v.Count, v.Prev, v.TAT, v.Lease, v.Isolates = r.ReadInt(), r.ReadInt(), r.ReadInt(), r.ReadInt(), r.ReadInt(), r.ReadInt()
	v.Stand, v.Exhausted, v.Life, v.Limit, v.Held, v.StandTo, v.Pace = 0, false, 0, 0, 0, 0, 0
	if n >= 9 {
		v.Stand = r.ReadInt()
	}
	if n >= 10 {
		v.Exhausted = r.ReadBool()
	}
	if n >= 11 {
		v.Life = r.ReadInt()
	}
	if n >= 12 {
		v.Limit = r.ReadInt()
	}
	if n >= 13 {
		v.Held = r.ReadInt()
	}
	if n >= 14 {
		v.StandTo = r.ReadInt()
	}
	if n == 15 {
		v.Pace = r.ReadInt()
	}
	if r.err == nil && r.off > rr.eEnd {
		r.SetErr("e", ErrShort)
	}
	if r.err != nil {
		return nil, nil, false
	}
	if len(key) == 0 || len(key) > MaxKeyLen {
		r.SetErr("e.key", errKeyLen)
		return nil, nil, false
	}
	return limiter, key, true
}

// Err returns the first decoding error.
func (rr *ReplyReader) Err() error { return rr.r.err }

// HasUpstream reports whether the reply carries upstream views.
func (rr *ReplyReader) HasUpstream() bool { return rr.upStart >= 0 }

// Upstream calls fn for each UpView of the reply, with its limiter and key
// bytes (valid during the call), after Next has returned false. It returns
// the first decoding error.
func (rr *ReplyReader) Upstream(fn func(limiter, key []byte, v *UpView)) error {
	if rr.r.err != nil || rr.upStart < 0 {
		return rr.r.err
	}
	r := &rr.r
	r.off = rr.upStart
	m := r.ReadArrayHeader()
	if m > MaxBatchEntries {
		r.SetErr("up", errors.New("more than "+strconv.Itoa(MaxBatchEntries)+" entries"))
	}
	var v UpView
	for i := 0; i < m && r.err == nil; i++ {
		lim, key := readUpView(r, &v)
		if r.err != nil {
			break
		}
		if len(key) == 0 || len(key) > MaxKeyLen {
			r.SetErr("up.key", errKeyLen)
			break
		}
		fn(lim, key, &v)
	}
	return r.err
}

// UnmarshalMsg decodes a whole reply.
func (rp *Reply) UnmarshalMsg(src []byte) error {
	*rp = Reply{}
	var rr ReplyReader
	if err := rr.Reset(src); err != nil {
		return err
	}
	rp.Version, rp.Seq, rp.At = rr.Version, rr.Seq, rr.At
	rp.ResetGen, rp.ResetAll = rr.ResetGen, rr.ResetAll
	var v View
	for {
		lim, key, ok := rr.Next(&v)
		if !ok {
			break
		}
		v.Limiter, v.Key = string(lim), string(key)
		rp.Entries = append(rp.Entries, v)
	}
	if err := rr.Upstream(func(lim, key []byte, u *UpView) {
		w := *u
		w.Limiter, w.Key = string(lim), string(key)
		rp.Upstream = append(rp.Upstream, w)
	}); err != nil {
		return err
	}
	if err := rr.LimiterPauses(func(lim []byte, left int64) {
		rp.Paused = append(rp.Paused, LimiterPause{Limiter: string(lim), Left: left})
	}); err != nil {
		return err
	}
	return rr.Resets(func(lim, key []byte) {
		rp.Resets = append(rp.Resets, ResetKey{Limiter: string(lim), Key: string(key)})
	})
}

// errSecretLen says what an isolate secret must be.
const errSecretLen = "an isolate secret must be 16 to 64 bytes"

// ValidSecret reports whether s may be an isolate secret
// (Config.IsolateSecret, Batch.Secret): MinSecretLen to MaxSecretLen bytes.
func ValidSecret(s string) bool { return len(s) >= MinSecretLen && len(s) <= MaxSecretLen }

// readKeyCosts decodes a batch's array of KeyCost (field f: "dn" or "ak",
// what: its entries' name in errors); its count is checked against
// MaxBatchEntries before anything is allocated.
func readKeyCosts(r *Reader, f, what string) []KeyCost {
	m := r.ReadArrayHeader()
	if m > MaxBatchEntries {
		r.SetErr(f, errors.New(strconv.Itoa(m)+" "+what+", more than "+strconv.Itoa(MaxBatchEntries)))
		return nil
	}
	if !r.fits(m, 5) { // [limiter, key, window, cost]: 5 bytes at least
		return nil
	}
	ds := make([]KeyCost, m)
	for i := 0; i < m && r.err == nil; i++ {
		if r.ReadArrayHeader() != 4 && r.err == nil {
			r.SetErr(f+"["+strconv.Itoa(i)+"]", errors.New("want [limiter, key, window, cost]"))
			break
		}
		d := &ds[i]
		d.Limiter, d.Key = r.ReadString(), r.ReadString()
		d.Window, d.Cost = r.ReadInt(), r.ReadInt()
	}
	return ds
}

// checkKeyCosts checks a batch's denials or asks (f: "dn" or "ak").
func checkKeyCosts(f string, ds []KeyCost) error {
	for i := range ds {
		d := &ds[i]
		p := f + "[" + strconv.Itoa(i) + "]."
		if err := checkKeyWindow(p, d.Limiter, d.Key, d.Window); err != nil {
			return err
		}
		if d.Cost < 1 || d.Cost > MaxLimit {
			return &FieldError{p + "cost", errors.New("must be between 1 and 2^50")}
		}
	}
	return nil
}

// checkKeyWindow checks the limiter, key and window of a batch's entry or
// denial (f: its field path, ending in '.').
func checkKeyWindow(f, limiter, key string, window int64) error {
	switch {
	case limiter == "" || len(limiter) > MaxNameLen:
		return &FieldError{f + "limiter", errors.New("must be 1 to " + strconv.Itoa(MaxNameLen) + " bytes")}
	case key == "" || len(key) > MaxKeyLen:
		return &FieldError{f + "key", errors.New("must be 1 to " + strconv.Itoa(MaxKeyLen) + " bytes")}
	case window < 0:
		return &FieldError{f + "window", errors.New("must be >= 0")}
	}
	return nil
}
