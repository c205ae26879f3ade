// Package history is the coordinator's usage history: per limiter and per
// kept key, the cost admitted, denied and paused per minute for 24 hours
// and per hour for 30 days, kept in the coordinator's store (Pebble, or
// Redis where every coordinator adds to the same buckets, so the history
// of a fleet of coordinators adds up). The Recorder (recorder.go)
// aggregates what the merge applies in memory and writes one minute
// bucket per series once per minute, not per sync; the Store
// (pebblestore/history.go, redisstore/history.go) adds it to what is
// stored and drops what is past its retention.
package history

import (
	"errors"
	"time"

	"github.com/edgelimit/edgelimit/wasm/limitmath"
)

// Resolution is the width of a history bucket.
type Resolution byte

// The two resolutions, with what each keeps.
const (
	// Minute buckets: one per minute, kept MinuteBuckets (24 h).
	Minute Resolution = 'm'
	// Hour buckets: one per hour, kept HourBuckets (30 days).
	Hour Resolution = 'h'
)

// Retention of each resolution, in buckets.
const (
	// MinuteBuckets is how many minute buckets are kept: 1440 (24 h).
	MinuteBuckets = 24 * 60
	// HourBuckets is how many hour buckets are kept: 720 (30 days).
	HourBuckets = 30 * 24
)

// Width returns the width of a bucket of r, ns.
func (r Resolution) Width() int64 {
	if r == Hour {
		return int64(time.Hour)
	}
	return int64(time.Minute)
}

// Kept returns how many buckets of r are kept.
func (r Resolution) Kept() int64 {
	if r == Hour {
		return HourBuckets
	}
	return MinuteBuckets
}

// Bucket returns the index of the bucket of r holding time t (ns since
// the Unix epoch): t / Width, rounded down.
func (r Resolution) Bucket(t int64) int64 {
	w := r.Width()
	if t < 0 {
		return (t - w + 1) / w
	}
	return t / w
}

// Valid reports whether r is Minute or Hour.
func (r Resolution) Valid() bool { return r == Minute || r == Hour }

// Counts is the cost of one bucket. Admitted is the cost the isolates
// admitted (the batches' Delta); Denied is the cost they refused for good
// (wire.Batch.EachDenial: their final denials, or Demand - Delta from
// modules that do not report them) on keys not paused; Paused is that
// cost on keys under an upstream or fleet pause, or with an open circuit,
// when the batch was merged.
type Counts struct {
	Admitted int64 `json:"admitted"`
	Denied   int64 `json:"denied"`
	Paused   int64 `json:"paused"`
}

// Add adds o to c, saturating.
func (c *Counts) Add(o Counts) {
	c.Admitted = limitmath.AddSat(c.Admitted, o.Admitted)
	c.Denied = limitmath.AddSat(c.Denied, o.Denied)
	c.Paused = limitmath.AddSat(c.Paused, o.Paused)
}

// Zero reports whether c counts nothing.
func (c Counts) Zero() bool { return c == Counts{} }

// Series names one history: a limiter's total (Total set, Key empty) or one
// key of it.
type Series struct {
	Limiter string
	Key     string
	Total   bool
}

// Point is the counts of one series in one bucket, as the Recorder adds
// them to the Store.
type Point struct {
	Res    Resolution
	Bucket int64
	Series Series
	Counts Counts
}

// Kept is the last global view of a kept key (wire.View's window, count,
// prev and tat), when it was made (At, coordinator ns) and when the key was
// last reported (Seen, ns): what the dashboard shows of the key after a
// restart, before it syncs again.
type Kept struct {
	Key                      string
	Window, Count, Prev, TAT int64
	At, Seen                 int64
}

// Store keeps the history. Implementations are safe for concurrent use.
type Store interface {
	// AddHistory adds each point's counts to what is stored for its series
	// and bucket (several coordinators over one store add up), and keeps
	// the bucket for its resolution's retention. id names the write (unique
	// per process and write; a retry of a failed write reuses it): a store
	// that could apply part of a write and then fail applies each id at
	// most once.
	AddHistory(id string, pts []Point) error
	// ReadHistory returns the counts of s at resolution res in buckets
	// [from, to): element i is bucket from+i (zero where nothing is
	// stored). to - from is at most res.Kept().
	ReadHistory(res Resolution, s Series, from, to int64) ([]Counts, error)
	// TrimHistory deletes the buckets of res before bucket before (a
	// store whose records expire by themselves may do nothing).
	TrimHistory(res Resolution, before int64) error
	// SaveKept stores the views of kept keys of limiter (replacing what
	// is stored for those keys) and deletes the keys of gone.
	SaveKept(limiter string, kept []Kept, gone []string) error
	// LoadKept returns the stored kept keys of limiter, in no order.
	LoadKept(limiter string) ([]Kept, error)
}

// ErrCorrupt is returned for a stored history record that does not decode.
var ErrCorrupt = errors.New("history: corrupt record")

// maxRead is the most buckets one ReadHistory may ask for.
func maxRead(res Resolution) int64 { return res.Kept() }

// CheckRange returns an error when [from, to) is not a range ReadHistory
// takes for res.
func CheckRange(res Resolution, from, to int64) error {
	if !res.Valid() {
		return errors.New("history: resolution must be minute or hour")
	}
	if to < from || to-from > maxRead(res) {
		return errors.New("history: range must hold 0 to the resolution's retention of buckets")
	}
	return nil
}
