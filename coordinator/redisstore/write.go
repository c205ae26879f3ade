package redisstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/edgelimit/edgelimit/coordinator/merge"

	"github.com/redis/go-redis/v9"
)

// The write path: each SubWrite is one call of subScript on its bucket's
// master, the calls grouped per master into one pipeline on one
// connection (then WAIT there), the isolates' high-water marks advanced by
// markScript the same way.

// subScript is a SubWrite: KEYS are the M marks, then the R records, then
// the C marks to confirm; ARGV[1] is M, ARGV[2] is C, then per mark its
// seq and TTL (ms), then per record the expected version prefix ("" when
// absent), the new value and its TTL (ms), then per mark to confirm its
// TTL (ms). Returns 0 applied (the marks to confirm had their TTL renewed),
// 1 conflict (a version changed), 2 duplicate (a mark is already at its
// seq: the write of an earlier attempt, whose reply or WAIT was lost). A
// counter record (count.go: its limiter was countable when written) has
// no version: it counts as absent, and is replaced by the record merged
// from its counts.
// Renewing a TTL is a write: WAIT after it covers the earlier write too.
var subScript = redis.NewScript(`
local nm = tonumber(ARGV[1])
local nc = tonumber(ARGV[2])
local nr = #KEYS - nm - nc
for i = 1, nm do
  local m = redis.call('GET', KEYS[i])
  if m and tonumber(m) >= tonumber(ARGV[1+2*i]) then
    redis.call('PEXPIRE', KEYS[i], ARGV[2+2*i])
    return 2
  end
end
local base = 2*nm + 3
for i = 1, nr do
  local j = base + 3*(i-1)
  local v = redis.call('GET', KEYS[nm+i])
  local want = ARGV[j]
  if v and string.byte(v, 1) ~= 67 then
    if string.sub(v, 1, 20) ~= want then return 1 end
  elseif want ~= '' then return 1 end
end
for i = 1, nr do
  local j = base + 3*(i-1)
  redis.call('SET', KEYS[nm+i], ARGV[j+1], 'PX', ARGV[j+2])
end
for i = 1, nm do
  redis.call('SET', KEYS[i], ARGV[1+2*i], 'PX', ARGV[2+2*i])
end
local cbase = base + 3*nr
for i = 1, nc do
  redis.call('PEXPIRE', KEYS[nm+nr+i], ARGV[cbase+i-1])
end
return 0
`)

// markScript advances an isolate's high-water mark: KEYS[1]; ARGV seq,
// value, TTL (ms). Returns 1 when set, 2 when it held seq already, 0 when
// it held more (nothing written). A mark already at seq (a duplicate's: an
// earlier attempt set it, and its WAIT may not have been met) has its TTL
// renewed, a write, so that WAIT after it covers the earlier one.
var markScript = redis.NewScript(`
local cur = tonumber(redis.call('HGET', KEYS[1], 's') or '0')
if cur == tonumber(ARGV[1]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return 2
end
if cur > tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 's', ARGV[1], 'v', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
`)

func ms(ns int64) int64 { return max(ns/1e6, 1) }

// evalOnMasters runs each script call on the master of its first key,
// grouped per master into one pipeline (one round trip per master), with
// WAIT at the end of each pipeline when Options.Wait is set. It returns
// each call's result; ran reports, per call, whether its script
// ran (res holds its result) even when err reports a failure (of other
// calls, or of WAIT). Calls that did not run for a retryable error (a
// failover: see retry.go) are sent again, to the master the reloaded slot
// map names, until Options.RetryFor or ctx's end. A call that did run but
// whose reply was lost is sent again too: the marks make it a duplicate.
//
// With combine set, the calls bound for one master are sent as the one
// call combine makes of them (a script that does each one's work, see
// combiner), whose result is split back into theirs; they are grouped
// again after each reload of the slot map.
func (s *Store) evalOnMasters(ctx context.Context, calls []scriptCall, combine combiner) (res []any, ran []bool, err error) {
	res, ran = make([]any, len(calls)), make([]bool, len(calls))
	if err := s.settingsOK(ctx); err != nil {
		return res, ran, err // none ran
	}
	pending := make([]int, len(calls))
	for i := range pending {
		pending[i] = i
	}
	end := s.retryDeadline(ctx, time.Now())
	wait := retryBackoff
	for {
		// Room for the pipeline and for WAIT's own timeout, so that a WAIT
		// not met is answered as such rather than cut by the deadline.
		actx, cancel := context.WithDeadline(ctx, later(end, time.Now().Add(2*s.opts.Timeout+s.opts.WaitTimeout)))
		errs := s.evalPending(actx, calls, pending, res, ran, end, combine)
		cancel()
		var again []int
		var failed []error
		retry := false
		for _, e := range errs {
			if e.err == nil {
				continue
			}
			failed = append(failed, e.err)
			if refusal(e.err) {
				s.health.failed("write", e.err) // Redis answers, and refuses writes
			}
			if retryable(e.err) {
				s.health.failed("write", e.err)
				retry = true
				for _, i := range e.idx {
					if !ran[i] {
						again = append(again, i)
					}
				}
			}
		}
		if len(failed) == 0 {
			s.health.succeeded()
			return res, ran, nil
		}
		err = errors.Join(failed...)
		if !retry || len(again) == 0 || ctx.Err() != nil || time.Now().Add(wait).After(end) {
			if retry {
				s.reloadLazy(ctx) // learn the new layout for the next group
			}
			return res, ran, err
		}
		if !s.backoff(ctx, &wait) {
			return res, ran, err
		}
		s.reload(ctx)
		pending = again
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// groupErr is the outcome of one master's pipeline: the calls it carried
// and its error.
type groupErr struct {
	idx []int
	err error
}

// combiner makes one script call of the calls idx (bound for one master),
// and returns it with split, which turns its result into theirs (in the
// order of idx).
type combiner func(calls []scriptCall, idx []int) (c scriptCall, split func(res any) ([]any, error))

// evalPending sends the calls of pending, one pipeline per master (one
// call per master with combine).
func (s *Store) evalPending(ctx context.Context, calls []scriptCall, pending []int, res []any, ran []bool, end time.Time, combine combiner) []groupErr {
	type group struct {
		node *redis.Client
		idx  []int
	}
	groups := map[*redis.Client]*group{}
	var order []*group
	for _, i := range pending {
		c := calls[i]
		node, err := s.masterFor(ctx, c.keys[0])
		if err != nil {
			return []groupErr{{idx: pending, err: fmt.Errorf("redisstore: master of %q: %w", c.keys[0], err)}}
		}
		g := groups[node]
		if g == nil {
			g = &group{node: node}
			groups[node] = g
			order = append(order, g)
		}
		g.idx = append(g.idx, i)
	}
	out := make([]groupErr, len(order))
	var wg sync.WaitGroup
	for gi, g := range order {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if combine == nil {
				out[gi] = groupErr{idx: g.idx, err: s.evalGroup(ctx, g.node, calls, g.idx, res, ran, end)}
				return
			}
			chunks := scriptChunks(calls, g.idx)
			ccalls, splits, cidx := make([]scriptCall, len(chunks)), make([]func(any) ([]any, error), len(chunks)), make([]int, len(chunks))
			for k, ch := range chunks {
				ccalls[k], splits[k] = combine(calls, ch)
				cidx[k] = k
			}
			cres, cran := make([]any, len(chunks)), make([]bool, len(chunks))
			err := s.evalGroup(ctx, g.node, ccalls, cidx, cres, cran, end)
			for k, ch := range chunks {
				if !cran[k] {
					continue
				}
				parts, serr := splits[k](cres[k])
				if serr != nil {
					out[gi] = groupErr{idx: g.idx, err: fmt.Errorf("redisstore: write on %s: %w", g.node.Options().Addr, serr)}
					return
				}
				for m, i := range ch {
					res[i], ran[i] = parts[m], true
				}
			}
			out[gi] = groupErr{idx: g.idx, err: err}
		}()
	}
	wg.Wait()
	return out
}

// maxScriptArgBytes bounds the arguments of one combined script call:
// 64 KiB (about 1,300 counted keys). Redis runs a script to its end while
// every other client waits; a group of maximal batches made one call per
// master that ran up to 0.9 s (PING waited as long). The calls of a
// group past the bound go as several scripts in one pipeline, each a few
// bucket parts, so other clients' commands run between them.
const maxScriptArgBytes = 64 << 10

// scriptChunks splits idx, the calls for one master, into runs whose
// arguments stay within maxScriptArgBytes (a call larger than that alone),
// in order.
func scriptChunks(calls []scriptCall, idx []int) [][]int {
	var chunks [][]int
	start, size := 0, 0
	for k, i := range idx {
		n := argBytes(calls[i].args)
		if k > start && size+n > maxScriptArgBytes {
			chunks = append(chunks, idx[start:k])
			start, size = k, 0
		}
		size += n
	}
	return append(chunks, idx[start:])
}

// argBytes is the size of a script call's arguments, bytes (8 for a
// number).
func argBytes(args []any) int {
	n := 0
	for _, a := range args {
		switch v := a.(type) {
		case string:
			n += len(v)
		case []byte:
			n += len(v)
		default:
			n += 8
		}
	}
	return n
}

// errNoReply is a script call's error when it has no reply.
var errNoReply = errors.New("redisstore: no reply")

type scriptCall struct {
	script *redis.Script
	keys   []string
	args   []any
	// readOnly reports whether the script, by its result, wrote nothing
	// (so that no WAIT follows). Nil: when it answered 1 (subScript's
	// conflict).
	readOnly func(res any) bool
}

// wrote reports whether the call wrote, by its result res.
func (c *scriptCall) wrote(res any) bool {
	if c.readOnly != nil {
		return !c.readOnly(res)
	}
	v, ok := res.(int64)
	return !ok || v != 1
}

// evalGroup runs the calls of idx on node in one pipeline, on one
// connection, then WAITs there (WAIT counts the replicas that have this
// connection's writes) when Options.Wait is set; see waitReplicas.
func (s *Store) evalGroup(ctx context.Context, node *redis.Client, calls []scriptCall, idx []int, res []any, ran []bool, end time.Time) error {
	addr := node.Options().Addr
	conn := node.Conn()
	defer conn.Close()
	cmds := make([]*redis.Cmd, len(idx))
	run := func(j []int, sha bool) error {
		defer s.stats.roundTrip(time.Now())
		_, err := conn.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, j := range j {
				c := calls[idx[j]]
				if sha {
					cmds[j] = c.script.EvalSha(ctx, p, c.keys, c.args...)
				} else {
					cmds[j] = c.script.Eval(ctx, p, c.keys, c.args...)
				}
			}
			return nil
		})
		return err
	}
	all := make([]int, len(idx))
	for j := range all {
		all[j] = j
	}
	err := run(all, true)
	if err != nil {
		// A script this node has not seen yet (first use, or a replica
		// that just took over): send those calls with the script itself.
		var again []int
		for j, c := range cmds {
			if c.Err() != nil && redis.HasErrorPrefix(c.Err(), "NOSCRIPT") {
				again = append(again, j)
			}
		}
		if len(again) > 0 {
			err = run(again, false)
			for _, c := range cmds {
				if c.Err() != nil {
					err = c.Err()
				}
			}
		}
	}
	var first error
	wrote := false
	for j, i := range idx {
		if cmds[j] == nil {
			continue
		}
		v, err := cmds[j].Result()
		if err == nil && v == nil {
			// No reply (a connection error leaves its commands without
			// one; none of the scripts answers nil).
			err = errNoReply
		}
		if err != nil {
			first = cmp.Or(first, err)
			continue
		}
		res[i], ran[i] = v, true
		wrote = wrote || calls[i].wrote(v)
	}
	// The pipeline's own error first: a connection error leaves its
	// commands without a reply (errNoReply).
	if err = cmp.Or(err, first); err != nil {
		return fmt.Errorf("redisstore: write on %s: %w", addr, err)
	}
	if s.opts.Wait > 0 && wrote {
		err := s.waitReplicas(ctx, conn, addr, end)
		if retryable(err) {
			// The connection broke before WAIT answered: what it wrote is
			// not known to be replicated. Send those calls again (their
			// marks make them duplicates if the write survived, and WAIT
			// after them covers it).
			for _, i := range idx {
				if ran[i] && calls[i].wrote(res[i]) {
					ran[i] = false
				}
			}
		}
		return err
	}
	return nil
}

// WriteShared performs subs (see SubWrite), one script call each, grouped
// per master. A SubWrite that only confirms marks needs no call without
// WAIT (Options.Wait 0): it is applied as it is.
func (s *Store) WriteShared(ctx context.Context, subs []merge.SubWrite) ([]merge.SubOutcome, error) {
	calls := make([]scriptCall, 0, len(subs))
	of := make([]int, 0, len(subs)) // of[k]: the sub of calls[k]
	for i := range subs {
		w := &subs[i]
		if len(w.Marks) == 0 && len(w.Keys) == 0 && s.opts.Wait == 0 {
			continue
		}
		t := s.Tag(w.Bucket)
		keys := make([]string, 0, len(w.Marks)+len(w.Keys)+len(w.Confirm))
		args := make([]any, 0, 2+2*len(w.Marks)+3*len(w.Keys)+len(w.Confirm))
		args = append(args, len(w.Marks), len(w.Confirm))
		for _, m := range w.Marks {
			keys = append(keys, t+"m"+m.Isolate)
			args = append(args, m.Seq, ms(m.TTL))
		}
		for j, k := range w.Keys {
			rk := s.RedisKey(k)
			if !strings.HasPrefix(rk, t) {
				return nil, fmt.Errorf("redisstore: key %q is not in bucket %d", k, w.Bucket)
			}
			keys = append(keys, rk)
			want := ""
			if w.Versions[j] != 0 {
				want = versionPrefix(w.Versions[j])
			}
			args = append(args, want, versionPrefix(w.Versions[j]+1)+string(w.Values[j]), ms(w.TTLs[j]))
		}
		for _, m := range w.Confirm {
			keys = append(keys, t+"m"+m.Isolate)
			args = append(args, ms(m.TTL))
		}
		if len(keys) == 0 {
			continue
		}
		calls, of = append(calls, scriptCall{script: subScript, keys: keys, args: args}), append(of, i)
	}
	outs := make([]merge.SubOutcome, len(subs)) // SubApplied where no call was needed
	if len(calls) == 0 {
		return outs, nil
	}
	res, ran, err := s.evalOnMasters(ctx, calls, nil)
	for k, v := range res {
		i := of[k]
		r, ok := v.(int64)
		if ran[k] && !ok {
			return nil, fmt.Errorf("redisstore: script answered %v", v)
		}
		switch {
		case !ran[k]:
			outs[i] = merge.SubFailed
		case r == 0 && err != nil:
			outs[i] = merge.SubUnconfirmed // written; WAIT (or a neighbour) failed
		case r == 0:
			outs[i] = merge.SubApplied
		case r == 1:
			outs[i] = merge.SubConflict
		case r == 2:
			outs[i] = merge.SubDuplicate
		default:
			return nil, fmt.Errorf("redisstore: script answered %d", r)
		}
	}
	return outs, err
}

// AdvanceMarks advances isolates' high-water marks (each unless already at
// its seq or beyond), grouped per master. A duplicate's mark (Dup) is only
// there to be confirmed: without WAIT (Options.Wait 0) it needs no call.
func (s *Store) AdvanceMarks(ctx context.Context, marks []merge.MarkSet) error {
	calls := make([]scriptCall, 0, len(marks))
	for _, m := range marks {
		if m.Dup && s.opts.Wait == 0 {
			continue
		}
		calls = append(calls, scriptCall{script: markScript, keys: []string{s.RedisKey([]byte(merge.HWMStorageKey(m.Isolate)))},
			args: []any{m.Seq, string(m.Value), ms(m.TTL)}, readOnly: markUnchanged})
	}
	if len(calls) == 0 {
		return nil
	}
	_, _, err := s.evalOnMasters(ctx, calls, nil)
	return err
}

// markUnchanged reports whether markScript wrote nothing, by its result
// (0: the mark held a later seq). Set (1) or renewed (2), the mark is
// written, and WAIT follows: without it a mark advanced on a master that
// then failed was lost, and the isolate's next batch refused as a gap.
func markUnchanged(res any) bool {
	v, ok := res.(int64)
	return ok && v == 0
}

var _ merge.SharedStore = (*Store)(nil)
