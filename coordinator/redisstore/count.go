package redisstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/edgelimit/edgelimit/coordinator/merge"

	"github.com/redis/go-redis/v9"
)

// Counter records (merge.CountingStore): the keys of approximate windowed
// limiters are counted in place by countScript, one call per master for
// the buckets it serves in a group (the CountWrites are combined per
// master by evalOnMasters, write.go, and grouped again after a failover). A counter record is a string of counterLen bytes under the
// key's usual name ({el:B}<storage key>):
//
//	'C' | int64 LE win, count, prev, sketch epoch | 32 bytes: the sketch of
//	epoch | 32 bytes: the sketch of epoch-1
//
// (a sketch bitmap's bit b is byte b/8, bit b%8: the little-endian layout
// of merge.Counter's four uint64 words). Each isolate's mark in the bucket
// for its counted part is {el:B}n<isolate>, apart from the mark of its
// read-merge-write part ({el:B}m<isolate>): the two are written by
// different atomic steps.

// counterLen is the length of a counter record.
const counterLen = 1 + 4*8 + 2*32

// countMax caps a count in a counter record: 2^53, below which Lua's
// numbers (doubles) count exactly (merge saturates at 2^63-1; no limit
// comes near either).
const countMax = 1 << 53

// countScript performs CountWrites of buckets of one master. Its KEYS is
// one key of the first bucket (which routes the call); the rest are named
// in ARGV: the script may touch keys of other hash slots of its node
// (allow-cross-slot-keys), and reads every key before it writes any, so a
// key whose slot is not served there (moved, migrating) fails the call
// before anything is written. ARGV[1] is the number of CountWrites, each a
// segment of ARGV: P, K, the P parts' marks, the K counter records, then
// per record its TTL (ms, set when it is written) and sketch epoch, then
// per part its seq, its mark's TTL (ms), its sketch bit and its adds,
// packed (countAddLen bytes each: uint32 LE record index from 0, int64 LE
// window, int64 LE delta). A part whose mark holds its seq or more is
// skipped and its mark's TTL renewed (a write, which WAIT then covers);
// the others set their mark and add. Each add rolls the record to its
// window (as limitmath.Roll: a window after win makes it the newest, win's
// count moving to prev when adjacent, dropped otherwise) and adds to win
// or win-1, or is stale; each applied part sets its sketch bit in the
// records it added to (the sketch rolled to the epoch given). Returns per
// CountWrite: per part 0 (applied) or 2 (skipped) and its stale adds, then
// per record its value after the call ("" when absent).
var countScript = redis.NewScript(`#!lua flags=allow-cross-slot-keys
local cap = 9007199254740992
local zero = string.rep('\0', 32)
local zero2 = zero .. zero
-- Read every record and mark first: nothing is written when one is not
-- served here.
local segs = {}
local ai = 2
for sg = 1, tonumber(ARGV[1]) do
  local np, nk = tonumber(ARGV[ai]), tonumber(ARGV[ai+1])
  local g = {np = np, nk = nk, mk = ai + 2, rk = ai + 2 + np, kb = ai + 2 + np + nk,
    win = {}, cnt = {}, prv = {}, val = {}, marks = {}}
  for j = 1, nk do
    local v = redis.call('GET', ARGV[g.rk+j-1])
    if v and #v == 97 and string.byte(v, 1) == 67 then
      g.win[j], g.cnt[j], g.prv[j] = struct.unpack('<i8i8i8', v, 2)
      g.val[j] = v
    else
      g.win[j], g.cnt[j], g.prv[j] = 0, 0, 0
      g.val[j] = false
    end
  end
  for i = 1, np do
    -- A mark that is not a number (written by something else) is none.
    g.marks[i] = tonumber(redis.call('GET', ARGV[g.mk+i-1]) or '')
  end
  g.pa = g.kb + 2*nk
  segs[sg] = g
  ai = g.pa + 4*np
end
local out = {}
for sg = 1, #segs do
  local g = segs[sg]
  local np, nk = g.np, g.nk
  local win, cnt, prv, val, bits = g.win, g.cnt, g.prv, g.val, {}
  local seg = {}
  local a = g.pa
  for i = 1, np do
    local seq = tonumber(ARGV[a])
    local m = g.marks[i]
    local mkey = ARGV[g.mk+i-1]
    if m and m >= seq then
      redis.call('PEXPIRE', mkey, ARGV[a+1])
      seg[2*i-1], seg[2*i] = 2, 0
    else
      redis.call('SET', mkey, ARGV[a], 'PX', ARGV[a+1])
      local sbit = tonumber(ARGV[a+2])
      local adds = ARGV[a+3]
      local stale = 0
      local pos = 1
      local n = #adds
      while pos < n do
        local j, w, d
        j, w, d, pos = struct.unpack('<I4i8i8', adds, pos)
        j = j + 1
        local cw = win[j]
        if w > cw then
          if w == cw + 1 then prv[j] = cnt[j] else prv[j] = 0 end
          cnt[j] = 0
          win[j] = w
          cw = w
        end
        if w == cw then
          cnt[j] = math.min(cnt[j] + d, cap)
        elseif w == cw - 1 then
          prv[j] = math.min(prv[j] + d, cap)
        else
          stale = stale + 1
        end
        local b = bits[j]
        if not b then
          bits[j] = sbit
        elseif b ~= sbit then
          if type(b) == 'number' then bits[j] = {b, sbit} else b[#b+1] = sbit end
        end
      end
      seg[2*i-1], seg[2*i] = 0, stale
    end
    a = a + 4
  end
  local kb = g.kb
  for j = 1, nk do
    local b = bits[j]
    if b then
      local v = val[j]
      local e = tonumber(ARGV[kb+2*j-1])
      local tail = zero2 -- the sketch of e, then of e-1
      if v then
        local ep = struct.unpack('<i8', v, 26)
        if e <= ep then
          tail, e = string.sub(v, 34), ep
        elseif e == ep + 1 then
          tail = zero .. string.sub(v, 34, 65)
        end
      end
      if type(b) == 'number' then b = {b} end
      for x = 1, #b do
        local k = math.floor(b[x] / 8) + 1
        local m = 2 ^ (b[x] % 8)
        local c = string.byte(tail, k)
        if c % (2*m) < m then
          tail = string.sub(tail, 1, k-1) .. string.char(c + m) .. string.sub(tail, k+1)
        end
      end
      v = 'C' .. struct.pack('<i8i8i8i8', win[j], cnt[j], prv[j], e) .. tail
      redis.call('SET', ARGV[g.rk+j-1], v, 'PX', ARGV[kb+2*j-2])
      val[j] = v
    end
    seg[2*np+j] = val[j] or ''
  end
  out[sg] = seg
end
return out
`)

// combineCounts is the combiner of countScript's segments (each call
// of AddCounts is one CountWrite's segment, without a script).
func combineCounts(calls []scriptCall, idx []int) (scriptCall, func(any) ([]any, error)) {
	c := scriptCall{script: countScript, keys: calls[idx[0]].keys, args: []any{len(idx)}}
	ro := true
	for _, i := range idx {
		c.args = append(c.args, calls[i].args...)
		ro = ro && calls[i].readOnly(nil)
	}
	c.readOnly = func(any) bool { return ro }
	return c, func(res any) ([]any, error) {
		segs, ok := res.([]any)
		if !ok || len(segs) != len(idx) {
			return nil, fmt.Errorf("count script answered %T, want %d segments", res, len(idx))
		}
		return segs, nil
	}
}

// countAddLen is the packed length of one add in countScript's ARGV.
const countAddLen = 4 + 8 + 8

// decodeCounter decodes a counter record; ok is false when v is not one.
func decodeCounter(v string) (c merge.Counter, ok bool) {
	if len(v) != counterLen || v[0] != 'C' {
		return c, false
	}
	b := []byte(v[1:])
	c.Win = int64(binary.LittleEndian.Uint64(b))
	c.Count = int64(binary.LittleEndian.Uint64(b[8:]))
	c.Prev = int64(binary.LittleEndian.Uint64(b[16:]))
	c.Epoch = int64(binary.LittleEndian.Uint64(b[24:]))
	for i := range c.Cur {
		c.Cur[i] = binary.LittleEndian.Uint64(b[32+8*i:])
		c.Last[i] = binary.LittleEndian.Uint64(b[64+8*i:])
	}
	return c, true
}

// isCounter reports whether a stored value is a counter record.
func isCounter(v string) bool { return len(v) == counterLen && v[0] == 'C' }

// AddCounts performs ws (see merge.CountWrite): one countScript call per
// master for the buckets it serves (then WAIT there when Options.Wait is
// set), retried through failovers as every write is (evalOnMasters).
func (s *Store) AddCounts(ctx context.Context, ws []merge.CountWrite) ([]merge.CountOutcome, error) {
	calls, err := s.countCalls(ws)
	if err != nil {
		return nil, err
	}
	outs := make([]merge.CountOutcome, len(ws))
	if len(calls) == 0 {
		return outs, nil
	}
	res, ran, err := s.evalOnMasters(ctx, calls, combineCounts)
	for i, v := range res {
		o := &outs[i]
		switch {
		case !ran[i]:
			o.Outcome = merge.SubFailed
			continue
		case err != nil && len(ws[i].Parts) > 0:
			o.Outcome = merge.SubUnconfirmed // written; WAIT (or a neighbour) failed
		default:
			o.Outcome = merge.SubApplied
		}
		if derr := s.decodeCountReply(&ws[i], v, o); derr != nil {
			return nil, derr
		}
	}
	return outs, err
}

// countCalls returns the countScript segment of each of ws (see
// combineCounts).
func (s *Store) countCalls(ws []merge.CountWrite) ([]scriptCall, error) {
	calls := make([]scriptCall, len(ws))
	for i := range ws {
		w := &ws[i]
		t := s.Tag(w.Bucket)
		args := make([]any, 0, 2+len(w.Parts)+3*len(w.Keys)+4*len(w.Parts))
		args = append(args, len(w.Parts), len(w.Keys))
		for _, p := range w.Parts {
			args = append(args, t+"n"+p.Mark.Isolate)
		}
		var keys []string
		for _, k := range w.Keys {
			rk := s.RedisKey(k.Key)
			if !strings.HasPrefix(rk, t) {
				return nil, fmt.Errorf("redisstore: key %q is not in bucket %d", k.Key, w.Bucket)
			}
			if keys == nil {
				keys = []string{rk} // routes the call (countScript)
			}
			args = append(args, rk)
		}
		for _, k := range w.Keys {
			args = append(args, ms(k.TTL), k.Epoch)
		}
		if keys == nil {
			return nil, fmt.Errorf("redisstore: count write of bucket %d has no key", w.Bucket)
		}
		for _, p := range w.Parts {
			packed := make([]byte, 0, countAddLen*len(p.Adds))
			for _, a := range p.Adds {
				if a.Key < 0 || a.Key >= len(w.Keys) || a.Delta < 0 || a.Window < 0 {
					return nil, fmt.Errorf("redisstore: add %+v out of range (%d keys)", a, len(w.Keys))
				}
				packed = binary.LittleEndian.AppendUint32(packed, uint32(a.Key))
				packed = binary.LittleEndian.AppendUint64(packed, uint64(a.Window))
				packed = binary.LittleEndian.AppendUint64(packed, uint64(min(a.Delta, countMax)))
			}
			args = append(args, p.Mark.Seq, ms(p.Mark.TTL), p.Bit, packed)
		}
		np := len(w.Parts)
		calls[i] = scriptCall{keys: keys, args: args, readOnly: func(any) bool { return np == 0 }}
	}
	return calls, nil
}

// decodeCountReply fills o from countScript's reply v to w.
func (s *Store) decodeCountReply(w *merge.CountWrite, v any, o *merge.CountOutcome) error {
	arr, ok := v.([]any)
	np, nk := len(w.Parts), len(w.Keys)
	if !ok || len(arr) != 2*np+nk {
		return fmt.Errorf("redisstore: count script answered %T of %d, want %d values", v, len(arr), 2*np+nk)
	}
	o.Dup, o.Stale, o.Counters = make([]bool, np), make([]int64, np), make([]merge.Counter, nk)
	for i := 0; i < np; i++ {
		st, ok1 := arr[2*i].(int64)
		stale, ok2 := arr[2*i+1].(int64)
		if !ok1 || !ok2 {
			return fmt.Errorf("redisstore: count script answered %v for part %d", arr[2*i:2*i+2], i)
		}
		o.Dup[i], o.Stale[i] = st == 2, stale
	}
	for j := 0; j < nk; j++ {
		rec, ok := arr[2*np+j].(string)
		if !ok {
			return fmt.Errorf("redisstore: count script answered %T for record %d", arr[2*np+j], j)
		}
		if rec == "" {
			continue
		}
		c, ok := decodeCounter(rec)
		if !ok {
			return fmt.Errorf("redisstore: counter record of %q: %w", w.Keys[j].Key, merge.ErrCorrupt)
		}
		o.Counters[j] = c
	}
	return nil
}

var _ merge.CountingStore = (*Store)(nil)
