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
// limiters are counted in place by countScript, one call per bucket,
// grouped per master into one pipeline as the key records' writes are
// (write.go). A counter record is a string of counterLen bytes under the
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

// countScript is a merge.CountWrite. KEYS are the P parts' marks, then the
// K counter records. ARGV[1] is P, ARGV[2] now (ns), ARGV[3] the TTL
// margin past a record's last useful window (ns: a period plus
// sharedTTLMargin are added); then per record its period (ns) and sketch
// epoch; then per part its seq, its mark's TTL (ms), its sketch bit and
// its adds, packed (countAddLen bytes each: uint32 LE record index from
// 0, int64 LE window, int64 LE delta). A part whose mark holds its seq or
// more is skipped and its mark's TTL renewed (a write, which WAIT then
// covers); the others set their mark and add. Each add rolls the record to
// its window (as limitmath.Roll: a window after win makes it the newest,
// win's count moving to prev when adjacent, dropped otherwise) and adds to
// win or win-1, or is stale; each applied part sets its sketch bit in the
// records it added to (the sketch rolled to the epoch given). Returns per
// part 0 (applied) or 2 (skipped) and its stale adds, then per record its
// value after the call ("" when absent).
var countScript = redis.NewScript(`
local np = tonumber(ARGV[1])
local nk = #KEYS - np
local now = tonumber(ARGV[2])
local margin = tonumber(ARGV[3])
local cap = 9007199254740992
local zero = string.rep('\0', 32)
local win, cnt, prv, val, bits = {}, {}, {}, {}, {}
for j = 1, nk do
  local v = redis.call('GET', KEYS[np+j])
  if v and #v == 97 and string.byte(v, 1) == 67 then
    win[j], cnt[j], prv[j] = struct.unpack('<i8i8i8', v, 2)
    val[j] = v
  else
    win[j], cnt[j], prv[j] = 0, 0, 0
    val[j] = false
  end
end
local out = {}
local a = 4 + 2*nk
for i = 1, np do
  local seq = tonumber(ARGV[a])
  local m = redis.call('GET', KEYS[i])
  if m and tonumber(m) >= seq then
    redis.call('PEXPIRE', KEYS[i], ARGV[a+1])
    out[2*i-1], out[2*i] = 2, 0
  else
    redis.call('SET', KEYS[i], ARGV[a], 'PX', ARGV[a+1])
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
      if not b then b = {} bits[j] = b end
      b[sbit] = true
    end
    out[2*i-1], out[2*i] = 0, stale
  end
  a = a + 4
end
for j = 1, nk do
  local b = bits[j]
  if b then
    local v = val[j]
    local ep, cur, last = 0, zero, zero
    if v then
      ep = struct.unpack('<i8', v, 26)
      cur, last = string.sub(v, 34, 65), string.sub(v, 66, 97)
    end
    local e = tonumber(ARGV[3+2*j])
    if e > ep then
      if e == ep + 1 then last = cur else last = zero end
      cur = zero
      ep = e
    end
    local bytes = {string.byte(cur, 1, 32)}
    for sb in pairs(b) do
      local k = math.floor(sb / 8) + 1
      local mask = 2 ^ (sb % 8)
      if bytes[k] % (2*mask) < mask then bytes[k] = bytes[k] + mask end
    end
    cur = string.char(unpack(bytes))
    v = 'C' .. struct.pack('<i8i8i8i8', win[j], cnt[j], prv[j], ep) .. cur .. last
    local p = tonumber(ARGV[2+2*j])
    local ttl = math.max((win[j] + 2) * p - now, 0) + p + margin
    redis.call('SET', KEYS[np+j], v, 'PX', math.floor(ttl / 1e6) + 1)
    val[j] = v
  end
  out[2*np+j] = val[j] or ''
end
return out
`)

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

// AddCounts performs ws (see merge.CountWrite), one countScript call each,
// grouped per master into one pipeline per master (then WAIT there when
// Options.Wait is set).
func (s *Store) AddCounts(ctx context.Context, ws []merge.CountWrite) ([]merge.CountOutcome, error) {
	calls := make([]scriptCall, len(ws))
	for i := range ws {
		w := &ws[i]
		t := s.Tag(w.Bucket)
		keys := make([]string, 0, len(w.Parts)+len(w.Keys))
		args := make([]any, 0, 3+2*len(w.Keys)+4*len(w.Parts))
		args = append(args, len(w.Parts), w.Now, merge.SharedTTLMargin)
		for _, p := range w.Parts {
			keys = append(keys, t+"n"+p.Mark.Isolate)
		}
		for _, k := range w.Keys {
			rk := s.RedisKey(k.Key)
			if !strings.HasPrefix(rk, t) {
				return nil, fmt.Errorf("redisstore: key %q is not in bucket %d", k.Key, w.Bucket)
			}
			keys = append(keys, rk)
			args = append(args, k.Period, k.Epoch)
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
		calls[i] = scriptCall{script: countScript, keys: keys, args: args,
			readOnly: func(any) bool { return np == 0 }}
	}
	outs := make([]merge.CountOutcome, len(ws))
	if len(calls) == 0 {
		return outs, nil
	}
	res, ran, err := s.evalOnMasters(ctx, calls)
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
