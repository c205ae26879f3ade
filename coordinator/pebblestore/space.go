package pebblestore

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// The free-space reserve. Pebble treats a failed write to its log (the
// WAL) as fatal: on a full disk a commit ends the process (its Logger's
// Fatalf), and a database opened on a full disk retries its first flush
// for as long as the disk stays full. So the store refuses to write before
// the disk is full: while the file system holding the data directory has
// less free space than Options.DiskReserve, Commit and the history's
// writes fail with ErrDiskLow (nothing written), Health reports it (the
// coordinator answers 503 and GET /healthz 503), and Open refuses to open.
// What stays free is for what Pebble writes on its own: flushes of the
// memtables (at most MemTableMemory) and compactions. Writing resumes by
// itself once space is freed. A disk filled by another process faster
// than spaceCheckEvery can still reach Pebble's fatal path.

// DefaultDiskReserve is the default of Options.DiskReserve: 64 MiB.
const DefaultDiskReserve = 64 << 20

// spaceCheckEvery is how long one reading of the free space is used:
// 100 ms (a statfs per reading; commits come far more often).
const spaceCheckEvery = 100 * time.Millisecond

// ErrDiskLow is the error of a write refused because the data directory's
// file system has less free space than the reserve (Options.DiskReserve).
var ErrDiskLow = errors.New("pebblestore: free disk space below the reserve")

// spaceGuard refuses writes while the free space under dir is below
// reserve.
type spaceGuard struct {
	dir     string
	reserve int64
	free    func(dir string) (int64, error)
	now     func() time.Time

	mu  sync.Mutex
	at  time.Time // when err was read (zero: never)
	err error     // the last reading's verdict: nil, or ErrDiskLow wrapped
	low bool      // the last verdict was low (for the log lines)
}

// newSpaceGuard returns a guard of dir, or nil when reserve is not
// positive (no check).
func newSpaceGuard(dir string, reserve int64, free func(string) (int64, error)) *spaceGuard {
	if reserve <= 0 {
		return nil
	}
	if free == nil {
		free = freeSpace
	}
	return &spaceGuard{dir: dir, reserve: reserve, free: free, now: time.Now}
}

// check returns nil while the free space is at least the reserve, else an
// error wrapping ErrDiskLow that says how much is free. A file system
// whose free space cannot be read passes (logged once).
func (g *spaceGuard) check() error {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	if !g.at.IsZero() && now.Sub(g.at) < spaceCheckEvery {
		return g.err
	}
	first := g.at.IsZero()
	g.at = now
	free, err := g.free(g.dir)
	if err != nil {
		if first {
			slog.Warn("pebblestore: cannot read the free disk space; writes are not held back before the disk is full", "dir", g.dir, "err", err.Error())
		}
		g.err = nil
		return nil
	}
	if free >= g.reserve {
		if g.low {
			slog.Info("pebblestore: free disk space back above the reserve; writing again", "dir", g.dir, "free_bytes", free, "reserve_bytes", g.reserve)
		}
		g.low, g.err = false, nil
		return nil
	}
	g.err = fmt.Errorf("%w: %s free on the file system of %s, reserve %s (--disk-reserve); writes refused until space is freed",
		ErrDiskLow, mib(free), g.dir, mib(g.reserve))
	if !g.low {
		slog.Error("pebblestore: free disk space below the reserve; refusing writes (503) until space is freed", "dir", g.dir, "free_bytes", free, "reserve_bytes", g.reserve)
	}
	g.low = true
	return g.err
}

// mib formats n bytes in MiB with one decimal.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
