package pebblestore

import (
	"math/rand/v2"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Backing off failed background work. Pebble retries a failed flush at once
// and without end (the next flush goroutine starts as the failed one
// returns): on a full disk that is thousands of failed flushes per second,
// a whole core, for as long as the disk stays full. Pebble has no setting
// for this, so the store gates it from below: every table Pebble creates
// goes through backoffFS, which, while a run of background errors lasts,
// holds the creation until the run's next attempt is due. The wait is in
// the flush or compaction goroutine, outside Pebble's mutex, so commits
// (to the WAL and the memtables, while they have room) and reads go on.

// Backoff of background work after a failure: the n-th consecutive failure
// holds the next table creation for a random time in [d/2, d], where d is
// FlushBackoffMin doubled n-1 times, at most FlushBackoffMax. A success
// ends the run. So a disk that stays full costs one failed flush every
// 0.5-1 s, and work resumes at most FlushBackoffMax after space returns.
const (
	// FlushBackoffMin is the hold after the first failure of a run: 5 ms
	// (2.5-5 ms with the jitter).
	FlushBackoffMin = 5 * time.Millisecond
	// FlushBackoffMax is the longest hold: 1 s (0.5-1 s with the jitter).
	FlushBackoffMax = time.Second
)

// backoffDelay returns how long the n-th consecutive failure (n >= 1) holds
// the next attempt: uniform in [d/2, d] (see FlushBackoffMin).
func backoffDelay(n int) time.Duration {
	d := FlushBackoffMax
	if n >= 1 && n <= 30 {
		d = min(FlushBackoffMin<<(n-1), FlushBackoffMax)
	}
	return d/2 + rand.N(d/2+1)
}

// backoffFS is the file system under Pebble: fs, with the creation of a
// table (an .sst or .blob file: what flushes and compactions write) held
// while bg says a retry is not due yet.
type backoffFS struct {
	vfs.FS
	bg *bgHealth
}

// Create implements vfs.FS.
func (fs backoffFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	if strings.HasSuffix(name, ".sst") || strings.HasSuffix(name, ".blob") {
		fs.bg.wait()
	}
	return fs.FS.Create(name, category)
}

// Unwrap returns the wrapped file system (vfs.Root).
func (fs backoffFS) Unwrap() vfs.FS { return fs.FS }
