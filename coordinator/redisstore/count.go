package redisstore

import (
	"context"
	"encoding/binary"
	"fmt"

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
// the records' packed TTLs and sketch epochs (countKeyLen bytes each:
// int64 LE TTL in ms, set when the record is written, int64 LE epoch),
// then per part its seq (decimal) and its packed rest: int64 LE mark TTL
// (ms), uint32 LE sketch bit, then its adds (countAddLen bytes each:
// uint32 LE record index from 0, int64 LE window, int64 LE delta). Each
// segment's marks and records are read by one MGET (they share its hash
// slot). A part whose mark holds its seq or more is skipped and its mark's
// TTL renewed (a write, which WAIT then covers); the others set their mark
// and add. Each add rolls the record to its window (as limitmath.Roll: a
// window after win makes it the newest, win's count moving to prev when
// adjacent, dropped otherwise) and adds to win or win-1 (or to win-1 when
// it is for win-2 and win is ahead of the record's epoch, the
// coordinator's window), or is stale; each
// applied part sets its sketch bit in the records it added to (the sketch
// rolled to the epoch given). Each record added to is written once, by
// one SET with its TTL. Returns one flat array: per CountWrite, per part 0
// (applied) or 2 (skipped) and its stale adds, then per record its value
// after the call ("" when absent).
//
// What a call costs the master (BenchmarkCountScript) is mostly its
// redis.call writes, one SET per record and one per part's mark; the rest
// is kept small: one MGET per segment, arguments packed per segment and
// per part rather than one per number, TTLs formatted once per value, the
// sketches handled as 16 uint32 LE words (8 of epoch, 8 of epoch-1: Lua's
// numbers hold 32 bits exactly) so that a record is decoded and encoded by
// one struct call each, and flat tables rather than one per segment.
var countScript = redis.NewScript(`#!lua flags=allow-cross-slot-keys
local cap = 9007199254740992
local recfmt = '<Bi8i8i8i8I4I4I4I4I4I4I4I4I4I4I4I4I4I4I4I4'
local words = '<I4I4I4I4I4I4I4I4I4I4I4I4I4I4I4I4'
-- TTLs (ms) as decimal strings, each formatted once per call.
local strs = {}
local function str(n)
  local s = strs[n]
  if not s then s = string.format('%d', n); strs[n] = s end
  return s
end
-- MGET of n names of ARGV from first, in chunks (unpack's stack bound).
local function mget(first, n)
  if n <= 500 then
    return redis.call('MGET', unpack(ARGV, first, first + n - 1))
  end
  local out = {}
  for i = 0, n - 1, 500 do
    local c = math.min(500, n - i)
    local r = redis.call('MGET', unpack(ARGV, first + i, first + i + c - 1))
    for x = 1, c do out[i + x] = r[x] end
  end
  return out
end
-- Read every record and mark first: nothing is written when one is not
-- served here. Per segment: its P, K, first mark's index in ARGV, values
-- read (marks, then records) and first record's index in win, cnt, prv.
local ns = tonumber(ARGV[1])
local snp, snk, smk, svals, sbase = {}, {}, {}, {}, {}
local win, cnt, prv = {}, {}, {}
local ai, base = 2, 0
for sg = 1, ns do
  local np, nk = tonumber(ARGV[ai]), tonumber(ARGV[ai+1])
  local mk = ai + 2
  local vals = mget(mk, np + nk)
  for j = 1, nk do
    local v = vals[np+j]
    if v and #v == 97 and string.byte(v, 1) == 67 then
      win[base+j], cnt[base+j], prv[base+j] = struct.unpack('<i8i8i8', v, 2)
      -- A record of another period (its window past the coordinator's
      -- next): started again, sketch too, as merge's refit does.
      if win[base+j] > struct.unpack('<i8', ARGV[mk+np+nk], 16*j - 7) + 1 then
        win[base+j], cnt[base+j], prv[base+j] = 0, 0, 0
        vals[np+j] = false
      end
    else
      win[base+j], cnt[base+j], prv[base+j] = 0, 0, 0
      vals[np+j] = false
    end
  end
  snp[sg], snk[sg], smk[sg], svals[sg], sbase[sg] = np, nk, mk, vals, base
  base = base + nk
  ai = mk + np + nk + 1 + 2*np
end
local out, o = {}, 0
local bits = {}
for sg = 1, ns do
  local np, nk, mk, vals, b0 = snp[sg], snk[sg], smk[sg], svals[sg], sbase[sg]
  local meta = ARGV[mk + np + nk]
  local a = mk + np + nk + 1
  for i = 1, np do
    local seq = ARGV[a]
    local adds = ARGV[a+1]
    local mttl, sbit, pos = struct.unpack('<i8I4', adds)
    -- A mark that is not a number (written by something else) is none.
    local m = tonumber(vals[i] or '')
    if m and m >= tonumber(seq) then
      redis.call('PEXPIRE', ARGV[mk+i-1], str(mttl))
      out[o+1], out[o+2] = 2, 0
    else
      redis.call('SET', ARGV[mk+i-1], seq, 'PX', str(mttl))
      local stale = 0
      local n = #adds
      while pos < n do
        local jr, w, d
        jr, w, d, pos = struct.unpack('<I4i8i8', adds, pos)
        local j = b0 + jr + 1
        local cw = win[j]
        if w > cw then
          if w == cw + 1 then prv[j] = cnt[j] else prv[j] = 0 end
          cnt[j] = 0
          win[j] = w
          cw = w
        end
        if w == cw then
          cnt[j] = math.min(cnt[j] + d, cap)
        elseif w == cw - 1 or (w == cw - 2 and cw > struct.unpack('<i8', meta, 16*jr + 9)) then
          -- (cw - 2: the record is a window ahead of the coordinator's
          -- clock, its epoch, moved there by an isolate whose clock runs
          -- fast; w is the window before the coordinator's current one,
          -- where honest isolates still report: counted a window late,
          -- as merge's applyDelta does, not dropped.)
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
      out[o+1], out[o+2] = 0, stale
    end
    o = o + 2
    a = a + 2
  end
  for j = 1, nk do
    local b = bits[b0+j]
    local v = vals[np+j]
    if b then
      local ttl, e = struct.unpack('<i8i8', meta, 16*j - 15)
      local w -- the sketch of e, then of e-1
      if v then
        local ep = struct.unpack('<i8', v, 26)
        if e <= ep then
          w, e = {struct.unpack(words, v, 34)}, ep
        elseif e == ep + 1 then
          w = {0, 0, 0, 0, 0, 0, 0, 0, struct.unpack(words, v, 34)}
        end
      end
      w = w or {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
      if type(b) == 'number' then b = {b} end
      for x = 1, #b do
        local k = math.floor(b[x] / 32) + 1
        local m = 2 ^ (b[x] % 32)
        local c = w[k]
        if c % (2*m) < m then w[k] = c + m end
      end
      local bj = b0 + j
      v = struct.pack(recfmt, 67, win[bj], cnt[bj], prv[bj], e, unpack(w, 1, 16))
      redis.call('SET', ARGV[mk+np+j-1], v, 'PX', str(ttl))
    end
    out[o+1] = v or ''
    o = o + 1
  end
end
return out
`)

// combineCounts is the combiner of countScript's segments (each call
// of AddCounts is one CountWrite's segment, without a script): the
// script answers one flat array, split back per segment by its P and K
// (its first two arguments).
func combineCounts(calls []scriptCall, idx []int) (scriptCall, func(any) ([]any, error)) {
	c := scriptCall{script: countScript, keys: calls[idx[0]].keys}
	n := 1
	for _, i := range idx {
		n += len(calls[i].args)
	}
	c.args = make([]any, 0, n)
	c.args = append(c.args, len(idx))
	ro := true
	for _, i := range idx {
		c.args = append(c.args, calls[i].args...)
		ro = ro && calls[i].readOnly(nil)
	}
	c.readOnly = func(any) bool { return ro }
	return c, func(res any) ([]any, error) {
		flat, ok := res.([]any)
		if !ok {
			return nil, fmt.Errorf("redisstore: count script answered %T, want an array", res)
		}
		segs := make([]any, len(idx))
		at := 0
		for k, i := range idx {
			np, _ := calls[i].args[0].(int)
			nk, _ := calls[i].args[1].(int)
			if at+2*np+nk > len(flat) {
				return nil, fmt.Errorf("redisstore: count script answered %d values, want more", len(flat))
			}
			segs[k] = flat[at : at+2*np+nk]
			at += 2*np + nk
		}
		if at != len(flat) {
			return nil, fmt.Errorf("redisstore: count script answered %d values, want %d", len(flat), at)
		}
		return segs, nil
	}
}

// countAddLen is the packed length of one add in countScript's ARGV.
const countAddLen = 4 + 8 + 8

// countKeyLen is the packed length of one record's TTL and epoch in
// countScript's ARGV.
const countKeyLen = 8 + 8

// decodeCounter decodes a counter record; ok is false when v is not one.
func decodeCounter(v string) (c merge.Counter, ok bool) {
	if len(v) != counterLen || v[0] != 'C' {
		return c, false
	}
	c.Win = int64(le64(v, 1))
	c.Count = int64(le64(v, 9))
	c.Prev = int64(le64(v, 17))
	c.Epoch = int64(le64(v, 25))
	for i := range c.Cur {
		c.Cur[i] = le64(v, 33+8*i)
		c.Last[i] = le64(v, 65+8*i)
	}
	return c, true
}

// le64 is the little-endian uint64 at v[i:i+8] (read from the string
// itself: a record's reply is not copied to be decoded).
func le64(v string, i int) uint64 {
	_ = v[i+7]
	return uint64(v[i]) | uint64(v[i+1])<<8 | uint64(v[i+2])<<16 | uint64(v[i+3])<<24 |
		uint64(v[i+4])<<32 | uint64(v[i+5])<<40 | uint64(v[i+6])<<48 | uint64(v[i+7])<<56
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
		args := make([]any, 0, 3+len(w.Keys)+3*len(w.Parts))
		args = append(args, len(w.Parts), len(w.Keys))
		for _, p := range w.Parts {
			args = append(args, t+"n"+p.Mark.Isolate)
		}
		var keys []string
		for _, k := range w.Keys {
			if len(k.Key) == 0 || k.Key[0] != merge.PrefixKey || s.Bucket(k.Key) != w.Bucket {
				return nil, fmt.Errorf("redisstore: key %q is not in bucket %d", k.Key, w.Bucket)
			}
			rk := t + string(k.Key) // RedisKey, its bucket known
			if keys == nil {
				keys = []string{rk} // routes the call (countScript)
			}
			args = append(args, rk)
		}
		if keys == nil {
			return nil, fmt.Errorf("redisstore: count write of bucket %d has no key", w.Bucket)
		}
		meta := make([]byte, 0, countKeyLen*len(w.Keys))
		for _, k := range w.Keys {
			meta = binary.LittleEndian.AppendUint64(meta, uint64(ms(k.TTL)))
			meta = binary.LittleEndian.AppendUint64(meta, uint64(k.Epoch))
		}
		args = append(args, meta)
		for _, p := range w.Parts {
			if p.Bit < 0 || p.Bit >= 256 {
				return nil, fmt.Errorf("redisstore: sketch bit %d out of range", p.Bit)
			}
			packed := make([]byte, 0, 12+countAddLen*len(p.Adds))
			packed = binary.LittleEndian.AppendUint64(packed, uint64(ms(p.Mark.TTL)))
			packed = binary.LittleEndian.AppendUint32(packed, uint32(p.Bit))
			for _, a := range p.Adds {
				if a.Key < 0 || a.Key >= len(w.Keys) || a.Delta < 0 || a.Window < 0 {
					return nil, fmt.Errorf("redisstore: add %+v out of range (%d keys)", a, len(w.Keys))
				}
				packed = binary.LittleEndian.AppendUint32(packed, uint32(a.Key))
				packed = binary.LittleEndian.AppendUint64(packed, uint64(a.Window))
				packed = binary.LittleEndian.AppendUint64(packed, uint64(min(a.Delta, countMax)))
			}
			args = append(args, p.Mark.Seq, packed)
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
