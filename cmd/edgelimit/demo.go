package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"text/tabwriter"
	"time"

	"github.com/edgelimit/edgelimit/coordinator"
	"github.com/edgelimit/edgelimit/edge/isolate"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

func init() {
	commands["demo"] = command{summary: "several wasm isolates deciding one key, with and without a coordinator", run: runDemo}
}

// demoResult is what one strategy did in the demo.
type demoResult struct {
	name                 string
	offered, admitted    int64
	overrun, worst       int64 // admitted beyond the limit: total over windows, worst window
	syncs                int64
	falseReject, windows int64
}

// runDemo runs N real isolates of the embedded module under virtual time,
// all offering traffic to one key at twice the limit, and an in-process
// coordinator (Pebble on an in-memory filesystem), and prints what each
// strategy admitted.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	isolates := fs.Int("isolates", 8, "number of isolates")
	limit := fs.Int64("limit", 100, "limit per window (requests)")
	period := fs.Duration("period", time.Second, "window length")
	overload := fs.Float64("overload", 2, "offered traffic as a multiple of the limit")
	syncEvery := fs.Duration("sync", 100*time.Millisecond, "sync interval of each isolate")
	duration := fs.Duration("duration", 10*time.Second, "simulated time")
	seed := fs.Uint64("seed", 1, "random seed")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *isolates < 1 || *limit < 1 || *period <= 0 || *overload <= 0 || *syncEvery <= 0 || *duration <= 0 {
		return fmt.Errorf("demo: isolates, limit, period, overload, sync and duration must be positive")
	}
	fmt.Fprintf(stdout, "%d isolates, one key, limit %d per %v, offered %.1fx the limit, sync every %v, %v simulated\n\n",
		*isolates, *limit, *period, *overload, *syncEvery, *duration)
	rt, err := isolate.NewRuntime(ctx, isolate.Options{})
	if err != nil {
		return err
	}
	defer rt.Close(ctx)
	d := demo{rt: rt, isolates: *isolates, limit: *limit, period: int64(*period), overload: *overload,
		sync: int64(*syncEvery), duration: int64(*duration), seed: *seed}
	var results []demoResult
	for _, s := range []struct {
		name string
		mode string
		sync bool
	}{
		{"local-only (no sync)", wire.Approximate, false},
		{"edgelimit approximate", wire.Approximate, true},
		{"edgelimit strict (leases)", wire.Strict, true},
	} {
		r, err := d.run(ctx, s.name, s.mode, s.sync)
		if err != nil {
			return err
		}
		results = append(results, r)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "strategy\tadmitted\toverrun\toverrun % of limit\tworst window\tsyncs\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f%%\t%d\t%d\t\n", r.name, r.admitted, r.overrun,
			100*float64(r.overrun)/float64(r.windows**limit), r.worst, r.syncs)
	}
	tw.Flush()
	fmt.Fprintf(stdout, "\n(the limit allows %d in %d windows; overrun is admitted beyond the limit per window, summed)\n",
		results[0].windows**limit, results[0].windows)
	return nil
}

type demo struct {
	rt             *isolate.Runtime
	isolates       int
	limit, period  int64
	overload       float64
	sync, duration int64
	seed           uint64
}

func (d *demo) run(ctx context.Context, name, mode string, sync bool) (demoResult, error) {
	res := demoResult{name: name}
	cfg := wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
		{Name: "api", Algorithm: wire.FixedWindow, Limit: d.limit, Period: d.period, Mode: mode}}}
	var now int64
	coord, err := coordinator.Open(coordinator.Options{InMemory: true, Config: cfg,
		Clock: func() int64 { return now }, GCInterval: -1})
	if err != nil {
		return res, err
	}
	defer coord.Close()
	rng := rand.New(rand.NewPCG(d.seed, 7))
	type iso struct {
		*isolate.Isolate
		next, gap, nextSync, lastSync int64
	}
	isos := make([]*iso, d.isolates)
	gap := int64(float64(d.period) * float64(d.isolates) / (d.overload * float64(d.limit)))
	for i := range isos {
		c := cfg
		c.IsolateID = fmt.Sprintf("demo-%d", i)
		is, err := d.rt.NewIsolate(ctx, c, uint64(i))
		if err != nil {
			return res, err
		}
		defer is.Close(ctx)
		isos[i] = &iso{Isolate: is, next: rng.Int64N(gap + 1), gap: gap, nextSync: rng.Int64N(d.sync) + 1}
	}
	doSync := func(is *iso) error {
		is.lastSync = now
		out, err := is.SyncOut(ctx, now, nil)
		if err != nil || len(out) == 0 {
			return err
		}
		var b wire.Batch
		if err := b.UnmarshalMsg(out); err != nil {
			return err
		}
		reply, err := coord.Sync(ctx, &b)
		if err != nil {
			return err
		}
		res.syncs++
		return is.SyncIn(ctx, reply.AppendMsg(nil), now)
	}
	admitted := map[int64]int64{}
	for {
		// The next event: the earliest request or sync of any isolate.
		evTime := func(is *iso) int64 {
			if sync {
				return min(is.next, is.nextSync)
			}
			return is.next
		}
		next := isos[0]
		for _, is := range isos[1:] {
			if evTime(is) < evTime(next) {
				next = is
			}
		}
		t := evTime(next)
		syncEv := sync && next.nextSync < next.next
		if t >= d.duration {
			break
		}
		now = t
		if syncEv {
			next.nextSync += d.sync
			if err := doSync(next); err != nil {
				return res, err
			}
			continue
		}
		next.next += next.gap
		res.offered++
		dec, err := next.Decide(ctx, 0, "llm-upstream", 1, now)
		if err != nil {
			return res, err
		}
		if dec.Allowed {
			res.admitted++
			admitted[now/d.period]++
		}
		if sync && dec.SyncWanted && now-next.lastSync >= d.sync/10 {
			if err := doSync(next); err != nil {
				return res, err
			}
		}
	}
	res.windows = d.duration / d.period
	for _, n := range admitted {
		if over := n - d.limit; over > 0 {
			res.overrun += over
			res.worst = max(res.worst, over)
		}
	}
	return res, nil
}
