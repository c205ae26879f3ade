//go:build wasip1

package main

import (
	"errors"

	"github.com/edgelimit/edgelimit/wasm/core"
	"github.com/edgelimit/edgelimit/wasm/wire"
	"github.com/extism/go-pdk"
)

// Extism-style exports: msgpack in through the Extism input, msgpack out
// through the Extism output, errors through the Extism error channel
// (return 1).

func fail(err error) int32 {
	pdk.SetError(err)
	return 1
}

//export configure
func extConfigure() int32 {
	if err := configure(pdk.Input()); err != nil {
		return fail(err)
	}
	return 0
}

// decide: input wire.DecideRequest, output wire.Decision.
//
//export decide
func extDecide() int32 {
	if lim == nil {
		return fail(core.ErrNotConfigured)
	}
	var q wire.DecideRequest
	if err := q.UnmarshalMsg(pdk.Input()); err != nil {
		return fail(err)
	}
	var cs [wire.MaxChecks]core.Check
	for i, c := range q.Checks {
		li := lim.LimiterIndex(c.Limiter)
		if li < 0 {
			return fail(errors.Join(core.ErrUnknownLimiter, errors.New("core: no limiter named \""+c.Limiter+"\"")))
		}
		cs[i] = core.Check{Limiter: li, Key: []byte(c.Key), Cost: c.Cost}
	}
	var r core.Result
	if err := lim.DecideMulti(cs[:len(q.Checks)], q.Now, &r); err != nil {
		return fail(err)
	}
	d := wire.DecisionOf(&r, lim.Config().Limiters[r.Limiter].Name)
	pdk.Output(d.AppendMsg(nil))
	return 0
}

// observe: input wire.Observation, output wire.Observed.
//
//export observe
func extObserve() int32 {
	if lim == nil {
		return fail(core.ErrNotConfigured)
	}
	r, err := observe(pdk.Input())
	if err != nil {
		return fail(err)
	}
	pdk.Output(r.AppendMsg(nil))
	return 0
}

// sync_out: input a msgpack integer, the time in ns; output the batch
// (empty when there is nothing to sync).
//
//export sync_out
func extSyncOut() int32 {
	if lim == nil {
		return fail(core.ErrNotConfigured)
	}
	r := wire.NewReader(pdk.Input())
	now := r.ReadInt()
	if err := r.Done(); err != nil {
		return fail(err)
	}
	out, err := lim.SyncOut(now, nil)
	if err != nil {
		return fail(err)
	}
	pdk.Output(out)
	return 0
}

// sync_in: input the coordinator's reply; the reply's own time ("at") is
// used as now.
//
//export sync_in
func extSyncIn() int32 {
	if lim == nil {
		return fail(core.ErrNotConfigured)
	}
	in := pdk.Input()
	var rr wire.ReplyReader
	if err := rr.Reset(in); err != nil {
		return fail(err)
	}
	if err := lim.SyncIn(in, rr.At); err != nil {
		return fail(err)
	}
	return 0
}

// stats: output the isolate's wire.Stats.
//
//export stats
func extStats() int32 {
	if lim == nil {
		return fail(core.ErrNotConfigured)
	}
	s := lim.Stats()
	pdk.Output(s.AppendMsg(nil))
	return 0
}

// reset: input the msgpack array [limiter, key].
//
//export reset
func extReset() int32 {
	if lim == nil {
		return fail(core.ErrNotConfigured)
	}
	r := wire.NewReader(pdk.Input())
	if r.ReadArrayHeader() != 2 && r.Err() == nil {
		return fail(errors.New("core: reset takes [limiter, key]"))
	}
	name, key := r.ReadString(), r.ReadStringBytes()
	if err := r.Done(); err != nil {
		return fail(err)
	}
	li := lim.LimiterIndex(name)
	if li < 0 {
		return fail(core.ErrUnknownLimiter)
	}
	if err := lim.Reset(li, key); err != nil {
		return fail(err)
	}
	return 0
}
