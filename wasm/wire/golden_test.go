package wire_test

import (
	"bytes"
	"encoding/hex"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// The golden tests prove that our hand-written codec and msgpack/v5 (what a
// host or coordinator may use) agree in both directions, and pin the bytes
// of every message in testdata/ so that a change of encoding is noticed.
// After an intended change of encoding, rewrite the files with
//
//	go test ./wasm/wire -run TestGoldenFiles -rewrite

var rewrite = flag.Bool("rewrite", false, "rewrite the golden files in testdata/")

// Fixtures: one value of each message, with strings of every length class
// (fixstr, str8, str16) and integers of every width, negative ones included.
var (
	key40  = strings.Repeat("k", 40)  // str8
	key256 = strings.Repeat("K", 256) // str16, the longest key

	fixConfig = wire.Config{Version: wire.Version, IsolateID: "edge-fra-07", MaxKeys: 100000, Limiters: []wire.LimiterConfig{
		// Decoding gives an empty, non-nil Overrides when the field is present.
		{Name: "llm", Algorithm: wire.FixedWindow, Limit: 6, Period: 1e9, Overrides: []wire.Override{},
			Upstream: &wire.UpstreamConfig{MaxPause: 600e9, MaxLimit: 10, CircuitFailures: -1, CircuitOpen: 2e9, Follow: wire.FollowAlways}},
		{Name: "customer", Algorithm: wire.SlidingWindow, Limit: 100, Period: 60e9, Mode: wire.Strict, FailPolicy: wire.FailClosed,
			Overrides: []wire.Override{{Key: "acme", Limit: 1000}, {Key: key40, Limit: 70000}}},
		{Name: "bucket", Algorithm: wire.TokenBucket, Limit: wire.MaxLimit, Period: wire.MaxPeriod, Burst: 300, Mode: wire.Approximate, Overrides: []wire.Override{}},
		{Name: "g", Algorithm: wire.GCRA, Limit: 200, Period: wire.MinPeriod, Burst: 40000, Overrides: []wire.Override{{Key: key256, Limit: 1}}},
	}}
	fixBatch = wire.Batch{Version: wire.Version, Isolate: "edge-fra-07", Seq: 70000, At: 1_763_700_000_123_456_789, Entries: []wire.Delta{
		{Limiter: "llm", Key: "user-1", Window: 1_763_700_000, Delta: 3, Demand: 5},
		{Limiter: "customer", Key: key40, Window: 29_395_000, Delta: 200, Demand: 300},
		{Limiter: "bucket", Key: key256, Window: 0, Delta: wire.MaxCost, Demand: wire.MaxLimit},
	}}
	fixReply = wire.Reply{Version: wire.Version, Seq: 70000, At: 1_763_700_000_223_456_789, Entries: []wire.View{
		{Limiter: "llm", Key: "user-1", Window: 1_763_700_000, Count: 6, Prev: 127, TAT: 0, Lease: -1, Isolates: 3},
		{Limiter: "customer", Key: key40, Window: 29_395_000, Count: 32768, Prev: 255, Lease: 40, Isolates: 128, Stand: 7, Exhausted: true, Life: 1_000_000_000},
		{Limiter: "bucket", Key: key256, TAT: 1_763_700_099_000_000_000, Lease: -33, Isolates: 65536},
	}}
	fixDecideRequest = wire.DecideRequest{Version: wire.Version, Now: 1_763_700_000_123_456_789, Checks: []wire.Check{
		{Limiter: "customer", Key: "acme", Cost: 1},
		{Limiter: "llm", Key: key40, Cost: 0},
		{Limiter: "bucket", Key: key256, Cost: wire.MaxCost},
	}}
	fixDecision = wire.Decision{Allowed: false, Limit: 100, Remaining: 0, Reset: 1_763_700_060_000_000_000,
		RetryAfter: -1, SyncWanted: true, SyncRetry: true, Limiter: "customer"}
	fixStats = wire.Stats{Keys: 100000, Decisions: 1 << 33, Denials: 65535, Evictions: 65536, EvictedUnsynced: 255,
		StateBytes: 18_000_000, Batches: 128, Replies: 127, ClockBackwards: 0, Errors: 31, UnsyncedCost: 42,
		UpstreamIgnored: 3, UpstreamPauses: 70000, CircuitOpens: 1, ForeignLimits: 2, ReportedAgain: 6}
	fixBatchSignals = wire.Batch{Version: wire.Version, Isolate: "edge-fra-07", Secret: "5f2b9c0e7a1d4386b0e9f2a7c4d18e63", Seq: 3, At: 1_763_700_000_123_456_789,
		Entries: []wire.Delta{{Limiter: "llm", Key: "user-1", Window: 1_763_700_000, Delta: 1, Demand: 1}},
		Signals: []wire.Signal{{Limiter: "llm", Key: "user-1", Pause: 30e9, Failures: 0, Successes: 2, Limit: 6},
			{Limiter: "customer", Key: key256, Failures: 5, Probe: true}}, ResetGen: 1_763_699_999_000_000_000}
	fixBatchDenials = wire.Batch{Version: wire.Version, Isolate: "edge-fra-07", Seq: 4, At: 1_763_700_001_000_000_000,
		Entries: []wire.Delta{{Limiter: "llm", Key: "user-1", Window: 1_763_700_001, Delta: 2, Demand: 2}},
		Denials: []wire.Denial{{Limiter: "llm", Key: "user-1", Window: 1_763_700_001, Cost: 3},
			{Limiter: "inbox", Key: key256, Window: 20_412, Cost: 1}}, Limits: true}
	fixBatchAmended = wire.Batch{Version: wire.Version, Isolate: "edge-fra-07", Seq: 4, At: 1_763_700_001_000_000_000,
		Entries: []wire.Delta{{Limiter: "llm", Key: "user-1", Window: 1_763_700_001, Delta: 0, Demand: 1}},
		Limits:  true,
		Spans:   true,
		Pace:    true,
		Asks:    []wire.Ask{{Limiter: "llm", Key: "user-1", Window: 1_763_700_001, Cost: 2}, {Limiter: "inbox", Key: key256, Window: 20_412, Cost: 1}}}
	fixBatchHandover = wire.Batch{Version: wire.Version, Isolate: "edge-fra-07~3fa2c1d09e7b", Secret: "0f1e2d3c4b5a69788796a5b4c3d2e1f0",
		Prev: "edge-fra-07", PrevSecret: "5f2b9c0e7a1d4386b0e9f2a7c4d18e63", Seq: 1, At: 1_763_700_002_000_000_000,
		Entries: []wire.Delta{{Limiter: "customer", Key: "acme", Window: 29_395_000, Delta: 3, Demand: 3}}}
	fixReplyUpstream = wire.Reply{Version: wire.Version, Seq: 3, At: 1_763_700_000_223_456_789,
		Entries: []wire.View{{Limiter: "llm", Key: "user-1", Window: 1_763_700_000, Count: 6, Lease: -1, Isolates: 3}},
		Upstream: []wire.UpView{{Limiter: "llm", Key: "user-1", Pause: 29_900_000_000, Limit: 6, Life: 59_000_000_000},
			{Limiter: "customer", Key: key256, Circuit: wire.CircuitHalfOpen, Probe: true, Life: 1},
			{Limiter: "g", Key: "x", Circuit: wire.CircuitOpen, Open: 1_500_000_000, Life: 1}},
		ResetGen: 1_763_700_000_000_000_000, Resets: []wire.ResetKey{{Limiter: "llm", Key: "user-2"}}, ResetAll: true}
	fixObservation = wire.Observation{Version: wire.Version, Limiter: "llm", Key: "user-1", Now: 1_763_700_000_123_456_789,
		Status: 429, Headers: [][2]string{{"Retry-After", "30"}, {"X-RateLimit-Remaining", "0"}}}
	fixObserved = wire.Observed{Paused: 30e9, Circuit: wire.CircuitClosed, Limit: 6, Sync: true, Ignored: "x-ratelimit-reset: not a number"}
)

// message is what every wire type implements.
type message interface {
	AppendMsg([]byte) []byte
	UnmarshalMsg([]byte) error
}

type goldenCase struct {
	name    string
	value   message
	fresh   func() message // a zero value to decode into
	generic func() any     // the value as msgpack/v5 decodes it, ints as int64
}

func goldenCases() []goldenCase {
	return []goldenCase{
		{"config", &fixConfig, func() message { return new(wire.Config) }, func() any { return configGeneric(&fixConfig) }},
		{"batch", &fixBatch, func() message { return new(wire.Batch) }, func() any { return batchGeneric(&fixBatch) }},
		{"reply", &fixReply, func() message { return new(wire.Reply) }, func() any { return replyGeneric(&fixReply) }},
		{"decide_request", &fixDecideRequest, func() message { return new(wire.DecideRequest) }, func() any { return decideRequestGeneric(&fixDecideRequest) }},
		{"decision", &fixDecision, func() message { return new(wire.Decision) }, func() any { return decisionGeneric(&fixDecision) }},
		{"stats", &fixStats, func() message { return new(wire.Stats) }, func() any { return statsGeneric(&fixStats) }},
		{"batch_signals", &fixBatchSignals, func() message { return new(wire.Batch) }, func() any { return batchGeneric(&fixBatchSignals) }},
		{"batch_denials", &fixBatchDenials, func() message { return new(wire.Batch) }, func() any { return batchGeneric(&fixBatchDenials) }},
		{"batch_handover", &fixBatchHandover, func() message { return new(wire.Batch) }, func() any { return batchGeneric(&fixBatchHandover) }},
		{"batch_amended", &fixBatchAmended, func() message { return new(wire.Batch) }, func() any { return batchGeneric(&fixBatchAmended) }},
		{"reply_upstream", &fixReplyUpstream, func() message { return new(wire.Reply) }, func() any { return replyGeneric(&fixReplyUpstream) }},
		{"observation", &fixObservation, func() message { return new(wire.Observation) }, func() any { return observationGeneric(&fixObservation) }},
		{"observed", &fixObserved, func() message { return new(wire.Observed) }, func() any {
			return map[string]any{"paused_ns": fixObserved.Paused, "circuit": fixObserved.Circuit, "limit": fixObserved.Limit,
				"sync": fixObserved.Sync, "ignored": fixObserved.Ignored}
		}},
	}
}

func configGeneric(c *wire.Config) map[string]any {
	lims := []any{}
	for _, l := range c.Limiters {
		ovs := []any{}
		for _, o := range l.Overrides {
			ovs = append(ovs, []any{o.Key, o.Limit})
		}
		m := map[string]any{"name": l.Name, "algorithm": l.Algorithm, "limit": l.Limit,
			"period_ns": l.Period, "burst": l.Burst, "mode": l.Mode, "read_through": l.ReadThrough, "overrides": ovs}
		if l.FailPolicy != "" { // encoded only when set
			m["fail_policy"] = l.FailPolicy
		}
		if u := l.Upstream; u != nil { // encoded only when set
			m["upstream"] = map[string]any{"max_pause_ns": u.MaxPause, "max_limit": u.MaxLimit,
				"circuit_failures": u.CircuitFailures, "circuit_open_ns": u.CircuitOpen}
			if u.Follow != "" {
				m["upstream"].(map[string]any)["follow"] = u.Follow
			}
		}
		lims = append(lims, m)
	}
	m := map[string]any{"v": c.Version, "iso": c.IsolateID, "max_keys": c.MaxKeys, "limiters": lims}
	if c.IsolateSecret != "" {
		m["secret"] = c.IsolateSecret
	}
	return m
}

func batchGeneric(b *wire.Batch) map[string]any {
	es := []any{}
	for _, d := range b.Entries {
		es = append(es, []any{d.Limiter, d.Key, d.Window, d.Delta, d.Demand})
	}
	m := map[string]any{"v": b.Version, "iso": b.Isolate, "seq": b.Seq, "at": b.At, "e": es}
	if len(b.Signals) > 0 {
		up := []any{}
		for _, s := range b.Signals {
			up = append(up, []any{s.Limiter, s.Key, s.Pause, s.Failures, s.Successes, s.Limit, s.Probe})
		}
		m["up"] = up
	}
	if b.ResetGen > 0 {
		m["rg"] = b.ResetGen
	}
	if b.Secret != "" {
		m["sec"] = b.Secret
	}
	if b.Prev != "" {
		m["pv"], m["pvs"] = b.Prev, b.PrevSecret
	}
	if b.Limits {
		m["lim"] = true
	}
	if b.Spans {
		m["sp"] = true
	}
	if b.Pace {
		m["pc"] = true
	}
	if b.ReportsDenials() {
		dn := []any{}
		for _, d := range b.Denials {
			dn = append(dn, []any{d.Limiter, d.Key, d.Window, d.Cost})
		}
		m["dn"] = dn
	}
	if len(b.Asks) > 0 {
		ak := []any{}
		for _, a := range b.Asks {
			ak = append(ak, []any{a.Limiter, a.Key, a.Window, a.Cost})
		}
		m["ak"] = ak
	}
	return m
}

func observationGeneric(o *wire.Observation) map[string]any {
	hs := []any{}
	for _, h := range o.Headers {
		hs = append(hs, []any{h[0], h[1]})
	}
	return map[string]any{"v": o.Version, "limiter": o.Limiter, "key": o.Key, "now": o.Now, "status": o.Status, "h": hs}
}

func replyGeneric(rp *wire.Reply) map[string]any {
	es := []any{}
	for _, v := range rp.Entries {
		es = append(es, []any{v.Limiter, v.Key, v.Window, v.Count, v.Prev, v.TAT, v.Lease, v.Isolates, v.Stand, v.Exhausted, v.Life})
	}
	m := map[string]any{"v": rp.Version, "seq": rp.Seq, "at": rp.At, "e": es}
	if len(rp.Upstream) > 0 {
		up := []any{}
		for _, u := range rp.Upstream {
			a := []any{u.Limiter, u.Key, u.Pause, u.Circuit, u.Open, u.Probe, u.Limit}
			if u.Life != 0 {
				a = append(a, u.Life)
			}
			up = append(up, a)
		}
		m["up"] = up
	}
	if rp.ResetGen != 0 {
		m["rg"] = rp.ResetGen
	}
	if len(rp.Resets) > 0 {
		rs := []any{}
		for _, r := range rp.Resets {
			rs = append(rs, []any{r.Limiter, r.Key})
		}
		m["rs"] = rs
	}
	if rp.ResetAll {
		m["ra"] = true
	}
	return m
}

func decideRequestGeneric(q *wire.DecideRequest) map[string]any {
	cs := []any{}
	for _, c := range q.Checks {
		cs = append(cs, []any{c.Limiter, c.Key, c.Cost})
	}
	return map[string]any{"v": q.Version, "now": q.Now, "c": cs}
}

func decisionGeneric(d *wire.Decision) map[string]any {
	return map[string]any{"v": int64(wire.Version), "allowed": d.Allowed, "limit": d.Limit, "remaining": d.Remaining,
		"reset_ns": d.Reset, "retry_after_ns": d.RetryAfter, "sync": d.SyncWanted, "sync_retry": d.SyncRetry, "limiter": d.Limiter}
}

func statsGeneric(s *wire.Stats) map[string]any {
	return map[string]any{"keys": s.Keys, "decisions": s.Decisions, "denials": s.Denials, "evictions": s.Evictions,
		"evicted_unsynced": s.EvictedUnsynced, "state_bytes": s.StateBytes, "batches": s.Batches,
		"replies": s.Replies, "clock_backwards": s.ClockBackwards, "errors": s.Errors, "unsynced_cost": s.UnsyncedCost,
		"upstream_ignored": s.UpstreamIgnored, "upstream_pauses": s.UpstreamPauses, "circuit_opens": s.CircuitOpens,
		"foreign_limits": s.ForeignLimits, "reported_again": s.ReportedAgain}
}

// normalize turns what msgpack/v5 decodes into interface{} into the generic
// form: every integer type becomes int64, slices and maps recursively.
func normalize(t *testing.T, v any) any {
	t.Helper()
	switch x := v.(type) {
	case int8:
		return int64(x)
	case int16:
		return int64(x)
	case int32:
		return int64(x)
	case int64:
		return x
	case uint8:
		return int64(x)
	case uint16:
		return int64(x)
	case uint32:
		return int64(x)
	case uint64:
		if x > math.MaxInt64 {
			t.Fatalf("uint64 %d out of range", x)
		}
		return int64(x)
	case []any:
		out := []any{}
		for _, e := range x {
			out = append(out, normalize(t, e))
		}
		return out
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = normalize(t, e)
		}
		return out
	case string, bool, nil:
		return x
	}
	t.Fatalf("unexpected type %T from msgpack/v5", v)
	return nil
}

// Our encoding, decoded by msgpack/v5, gives every field.
func TestOursDecodedByMsgpackV5(t *testing.T) {
	for _, gc := range goldenCases() {
		t.Run(gc.name, func(t *testing.T) {
			b := gc.value.AppendMsg(nil)
			var got any
			if err := msgpack.Unmarshal(b, &got); err != nil {
				t.Fatalf("msgpack/v5 cannot decode our %s: %v\n%s", gc.name, err, hex.Dump(b))
			}
			if g, want := normalize(t, got), gc.generic(); !reflect.DeepEqual(g, want) {
				t.Errorf("msgpack/v5 decoded\n%#v\nwant\n%#v", g, want)
			}
			// msgpack/v5's decoder consumed exactly our bytes.
			dec := msgpack.NewDecoder(bytes.NewReader(b))
			if _, err := dec.DecodeInterface(); err != nil {
				t.Fatal(err)
			}
			if _, err := dec.DecodeInterface(); err == nil {
				t.Error("bytes left after the message")
			}
			// And we decode our own bytes back to the same value.
			back := gc.fresh()
			if err := back.UnmarshalMsg(b); err != nil {
				t.Fatalf("UnmarshalMsg of our own bytes: %v", err)
			}
			if !reflect.DeepEqual(back, gc.value) {
				t.Errorf("round trip\n%+v\nwant\n%+v", back, gc.value)
			}
		})
	}
}

// intForms cycles through the Go integer types msgpack/v5 encodes in
// different msgpack forms (int64 -> 0xd3, uint64 -> 0xcf, uint8 -> 0xcc,
// int8 -> 0xd0, ...), so our decoder sees every form a peer may send.
type intForms struct{ i int }

func (f *intForms) next(v int64) any {
	f.i++
	for k := 0; k < 10; k++ {
		switch (f.i + k) % 10 {
		case 0:
			return v // int64: 0xd3, 9 bytes
		case 1:
			if v >= 0 {
				return uint64(v) // 0xcf
			}
		case 2:
			if v >= 0 && v <= math.MaxUint8 {
				return uint8(v) // 0xcc
			}
		case 3:
			if v >= math.MinInt8 && v <= math.MaxInt8 {
				return int8(v) // 0xd0
			}
		case 4:
			if v >= 0 && v <= math.MaxUint16 {
				return uint16(v) // 0xcd
			}
		case 5:
			if v >= math.MinInt16 && v <= math.MaxInt16 {
				return int16(v) // 0xd1
			}
		case 6:
			if v >= 0 && v <= math.MaxUint32 {
				return uint32(v) // 0xce
			}
		case 7:
			if v >= math.MinInt32 && v <= math.MaxInt32 {
				return int32(v) // 0xd2
			}
		case 8:
			return int(v) // msgpack/v5 encodes int as int64 (0xd3)
		case 9:
			if v >= 0 {
				return uint(v)
			}
		}
	}
	return v
}

// retype replaces every int64 of a generic value by one of the other
// integer types, cycling.
func retype(v any, f *intForms) any {
	switch x := v.(type) {
	case int64:
		return f.next(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = retype(e, f)
		}
		return out
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = retype(e, f)
		}
		return out
	}
	return v
}

// encodeOrdered encodes a generic value with msgpack/v5's low-level
// Encoder, writing the map keys in the order given (a reply's entries must
// come last) and everything else through EncodeValue.
func encodeOrdered(t *testing.T, m map[string]any, order []string, compact bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(compact)
	if err := enc.EncodeMapLen(len(order)); err != nil {
		t.Fatal(err)
	}
	for _, k := range order {
		if err := enc.EncodeString(k); err != nil {
			t.Fatal(err)
		}
		if err := enc.Encode(m[k]); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

// msgpack/v5's encoding of the same structure, with every integer form and
// string length class, decodes with our UnmarshalMsg to the same value.
func TestMsgpackV5DecodedByOurs(t *testing.T) {
	for _, gc := range goldenCases() {
		for _, mode := range []string{"typed_ints", "compact_ints", "sorted_map"} {
			t.Run(gc.name+"/"+mode, func(t *testing.T) {
				m := gc.generic().(map[string]any)
				var b []byte
				switch mode {
				case "typed_ints":
					m = retype(m, &intForms{}).(map[string]any)
					order := orderOf(gc.name, m)
					b = encodeOrdered(t, m, order, false)
				case "compact_ints":
					b = encodeOrdered(t, m, orderOf(gc.name, m), true)
				case "sorted_map":
					if gc.name == "reply" {
						t.Skip("a reply's entries must be its last field (see TestReplyEntriesMustComeLast)")
					}
					var buf bytes.Buffer
					enc := msgpack.NewEncoder(&buf)
					enc.SetSortMapKeys(true)
					if err := enc.Encode(retype(m, &intForms{i: 5})); err != nil {
						t.Fatal(err)
					}
					b = buf.Bytes()
				}
				got := gc.fresh()
				if err := got.UnmarshalMsg(b); err != nil {
					t.Fatalf("UnmarshalMsg of msgpack/v5 bytes: %v\n%s", err, hex.Dump(b))
				}
				if !reflect.DeepEqual(got, gc.value) {
					t.Errorf("decoded\n%+v\nwant\n%+v", got, gc.value)
				}
			})
		}
	}
}

// orderOf lists a generic message's keys, sorted, with a reply's "e" last.
func orderOf(name string, m map[string]any) []string {
	var keys []string
	for k := range m {
		if k != "e" || name != "reply" {
			keys = append(keys, k)
		}
	}
	sortStrings(keys)
	if name == "reply" {
		keys = append(keys, "e")
	}
	return keys
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// A peer that sorts map keys puts the entries before "seq" and "v": the
// reply reader accepts the fields in any order.
func TestReplyFieldsInAnyOrder(t *testing.T) {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.SetSortMapKeys(true) // "at", "e", "seq", "v"
	if err := enc.Encode(replyGeneric(&fixReply)); err != nil {
		t.Fatal(err)
	}
	var rp wire.Reply
	if err := rp.UnmarshalMsg(buf.Bytes()); err != nil {
		t.Fatalf("reply with sorted keys: %v", err)
	}
	if rp.Seq != fixReply.Seq || rp.At != fixReply.At || len(rp.Entries) != len(fixReply.Entries) || rp.Entries[0] != fixReply.Entries[0] {
		t.Errorf("reply with sorted keys decoded as %+v, want %+v", rp, fixReply)
	}
}

// Unknown fields (a newer peer) are skipped, whatever their type.
func TestUnknownFieldsSkipped(t *testing.T) {
	for _, gc := range goldenCases() {
		t.Run(gc.name, func(t *testing.T) {
			m := gc.generic().(map[string]any)
			m["zz_new"] = map[string]any{"nested": []any{1, "two", 3.5, nil, true, []byte{1, 2}, map[string]any{"x": -1}}}
			m["aa_new"] = msgpack.RawMessage{0xd6, 0x01, 1, 2, 3, 4} // fixext4
			order := orderOf(gc.name, m)
			b := encodeOrdered(t, m, order, false)
			got := gc.fresh()
			if err := got.UnmarshalMsg(b); err != nil {
				t.Fatalf("UnmarshalMsg with unknown fields: %v", err)
			}
			if !reflect.DeepEqual(got, gc.value) {
				t.Errorf("decoded\n%+v\nwant\n%+v", got, gc.value)
			}
		})
	}
}

// The committed bytes of every message: a change of encoding fails here.
func TestGoldenFiles(t *testing.T) {
	for _, gc := range goldenCases() {
		t.Run(gc.name, func(t *testing.T) {
			path := filepath.Join("testdata", gc.name+".msgpack")
			b := gc.value.AppendMsg(nil)
			if *rewrite {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, b, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -rewrite to create it)", err)
			}
			if !bytes.Equal(b, want) {
				t.Errorf("encoding of %s changed (run with -rewrite if intended)\ngot:\n%s\nwant:\n%s", gc.name, hex.Dump(b), hex.Dump(want))
			}
			// The committed bytes still decode to the fixture.
			got := gc.fresh()
			if err := got.UnmarshalMsg(want); err != nil {
				t.Fatalf("golden bytes no longer decode: %v", err)
			}
			if !reflect.DeepEqual(got, gc.value) {
				t.Errorf("golden bytes decode to\n%+v\nwant\n%+v", got, gc.value)
			}
		})
	}
}

// Spot checks of the bytes themselves, independent of the golden files.
func TestEncodingSpotChecks(t *testing.T) {
	b := fixDecideRequest.AppendMsg(nil)
	if b[0] != 0x83 || !bytes.HasPrefix(b[1:], []byte{0xa1, 'v', 0x01, 0xa3, 'n', 'o', 'w', 0xd3}) {
		t.Errorf("decide request starts % x", b[:12])
	}
	if !bytes.Contains(b, append([]byte{0xd9, 40}, key40...)) {
		t.Error("a 40-byte key is not a str8")
	}
	if !bytes.Contains(b, append([]byte{0xda, 0x01, 0x00}, key256...)) {
		t.Error("a 256-byte key is not a str16")
	}
	if got := fmt.Sprintf("% x", (&wire.Decision{Allowed: true, Limiter: "x"}).AppendMsg(nil)[:3]); got != "89 a1 76" {
		t.Errorf("decision starts %s", got)
	}
}

// replyOfView encodes a reply holding one view of limiter "l", key "k"
// and the numbers nums after them, as a coordinator of any version
// would write it (the view's length is 2 + len(nums)).
func replyOfView(nums ...int64) []byte {
	v := wire.AppendArrayHeader(nil, 2+len(nums))
	v = wire.AppendString(v, "l")
	v = wire.AppendString(v, "k")
	for _, n := range nums {
		v = wire.AppendInt(v, n)
	}
	return replyOfRawView(v)
}

// replyOfRawView encodes a reply whose one entry is the encoded view v.
func replyOfRawView(v []byte) []byte {
	b := wire.AppendMapHeader(nil, 4)
	b = wire.AppendString(b, "v")
	b = wire.AppendInt(b, wire.Version)
	b = wire.AppendString(b, "seq")
	b = wire.AppendInt(b, 3)
	b = wire.AppendString(b, "at")
	b = wire.AppendInt(b, 5)
	b = wire.AppendString(b, "e")
	b = wire.AppendArrayHeader(b, 1)
	return append(b, v...)
}

// A view of 8 elements (a coordinator without standing leases) still
// decodes, with no standing lease.
func TestViewWithoutStand(t *testing.T) {
	b := replyOfView(9, 4, 2, 0, 3, 2)
	var rr wire.ReplyReader
	if err := rr.Reset(b); err != nil {
		t.Fatal(err)
	}
	v := wire.View{Stand: 99}
	if _, _, ok := rr.Next(&v); !ok || v.Lease != 3 || v.Isolates != 2 || v.Stand != 0 || v.Exhausted {
		t.Fatalf("8-element view: %+v ok=%v err=%v", v, ok, rr.Err())
	}
}

// Held is the view's 13th element, written (with limit, 0 or not) only
// when it, StandTo or Pace is not 0; StandTo the 14th, written only when
// it or Pace is not 0; Pace the 15th, written only when it is not 0; a
// view of 12 elements reads as held 0, one of 13 as standto 0, one of 14
// as pace 0, one of 16 is refused.
func TestViewHeld(t *testing.T) {
	for _, v := range []wire.View{
		{Limiter: "l", Key: "k", Window: 3, Count: 4, Lease: 2, Isolates: 1, Held: 5},
		{Limiter: "l", Key: "k", Window: 3, Count: 4, Lease: 2, Isolates: 1, Held: 5, Limit: 100},
		{Limiter: "l", Key: "k", Window: 3, Count: 4, Lease: 2, Isolates: 1, Limit: 100},
		{Limiter: "l", Key: "k", Window: 3, Count: 4, Lease: 2, Isolates: 1, Stand: 1, StandTo: 9},
		{Limiter: "l", Key: "k", Window: 3, Count: 4, Lease: 2, Isolates: 1, Stand: 1, StandTo: 9, Held: 2, Limit: 100},
		{Limiter: "l", Key: "k", Window: 3, Count: 4, Lease: 2, Isolates: 1, Pace: 40},
		{Limiter: "l", Key: "k", Window: 3, Count: 4, Lease: 2, Isolates: 1, Stand: 1, StandTo: 9, Held: 2, Limit: 100, Pace: 1 << 40},
	} {
		rp := wire.Reply{Version: wire.Version, Seq: 1, At: 1, Entries: []wire.View{v}}
		var back wire.Reply
		if err := back.UnmarshalMsg(rp.AppendMsg(nil)); err != nil || len(back.Entries) != 1 || back.Entries[0] != v {
			t.Errorf("%+v read back as %+v, %v", v, back.Entries, err)
		}
		var rr wire.ReplyReader
		if err := rr.Reset(rp.AppendMsg(nil)); err != nil {
			t.Fatal(err)
		}
		got := wire.View{StandTo: 99, Pace: 99}
		if _, _, ok := rr.Next(&got); !ok || got.StandTo != v.StandTo || got.Held != v.Held || got.Limit != v.Limit || got.Pace != v.Pace {
			t.Errorf("%+v read by the guest's reader as %+v", v, got)
		}
	}
	if b := (&wire.View{Limiter: "l", Key: "k", StandTo: 4}).AppendMsg(nil); b[0] != 0x9e {
		t.Fatalf("a view with standto starts %x, want a fixarray of 14", b[0])
	}
	if b := (&wire.View{Limiter: "l", Key: "k", Pace: 4}).AppendMsg(nil); b[0] != 0x9f {
		t.Fatalf("a view with pace starts %x, want a fixarray of 15", b[0])
	}
	// A well-formed view of 15 with a 16th element: its array header
	// (fixarray 0x9f) made an array16 of 16 and a number appended.
	v15 := (&wire.View{Limiter: "l", Key: "k", Pace: 5}).AppendMsg(nil)
	v16 := wire.AppendInt(append([]byte{0xdc, 0, 16}, v15[1:]...), 7)
	var rp wire.Reply
	if err := rp.UnmarshalMsg(replyOfRawView(v16)); err == nil {
		t.Error("a view of 16 elements accepted")
	}
}
