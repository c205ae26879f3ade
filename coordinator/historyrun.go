package coordinator

import (
	"log/slog"
	"time"

	"github.com/edgelimit/edgelimit/coordinator/history"
)

// historyTick is how often the coordinator seals a minute that is over
// and writes it (history.Recorder.Tick, Flush): each minute is written
// within about a second of its end, once.
const historyTick = time.Second

// histRun is the coordinator's usage history (package history) and the
// goroutine that writes it.
type histRun struct {
	rec  *history.Recorder
	stop chan struct{}
	done chan struct{}
}

// openHistory starts the history when the store keeps one (Pebble,
// Redis): it loads the kept keys stored before (the busiest keys then
// show at once) and returns the Recorder to observe the merge with, or
// nil.
func (c *Coordinator) openHistory() *history.Recorder {
	hs, ok := c.store.(history.Store)
	if !ok {
		return nil
	}
	rec := history.NewRecorder(c.opts.Config, hs, c.opts.HistoryKeys)
	kept, err := rec.Load()
	if err != nil {
		slog.Warn("coordinator: the busiest keys of the last run are not shown until they sync", "err", err)
	}
	c.dash.Restore(kept)
	c.dash.SetHistory(rec)
	c.hist = &histRun{rec: rec, stop: make(chan struct{}), done: make(chan struct{})}
	go c.historyLoop()
	return rec
}

func (c *Coordinator) historyLoop() {
	defer close(c.hist.done)
	t := time.NewTicker(historyTick)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-c.hist.stop:
			return
		case <-t.C:
		}
		now := c.opts.Clock.Now()
		c.hist.rec.Tick(now)
		err := c.hist.rec.Flush(now)
		if err != nil && !failing {
			slog.Warn("coordinator: history not written; kept in memory and retried", "err", err)
		}
		failing = err != nil
	}
}

// closeHistory stops the history's goroutine and writes the current,
// incomplete minute (a graceful stop): before the store closes.
func (c *Coordinator) closeHistory() {
	if c.hist == nil {
		return
	}
	close(c.hist.stop)
	<-c.hist.done
	if err := c.hist.rec.Stop(c.opts.Clock.Now()); err != nil {
		slog.Warn("coordinator: the last minutes of history were not written", "err", err)
	}
}
