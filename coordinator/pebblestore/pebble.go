// Package pebblestore is the merge.Store on a Pebble database, on disk or
// on vfs.NewMem(): synced commits, Bloom filters, a bounded block cache and
// memtables, and the health of Pebble's background work (health.go: a
// failed flush or compaction, as on a full disk), which it retries with
// backoff (backoff.go).
package pebblestore

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/edgelimit/edgelimit/coordinator/merge"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Store is the merge.Store on a Pebble database. Commits use pebble.Sync, so
// a committed batch survives kill -9 and power loss (the WAL is fsynced);
// concurrent commits share one fsync inside Pebble.
type Store struct {
	db        *pebble.DB
	writeOpts *pebble.WriteOptions // pebble.Sync on disk, NoSync in memory
	bg        *bgHealth            // background errors (health.go)
	space     *spaceGuard          // the free-space reserve (space.go); nil: none
	histMu    sync.Mutex           // one history read-add-write at a time (history.go)
}

// Pebble sizing. Memory stays bounded: at most
// MemTableStopWritesThreshold (4) memtables of pebbleMemTableSize
// (MemTableMemory), plus the block cache (Options.CacheSize).
const (
	// DefaultCacheSize is the default block cache (Options.CacheSize):
	// 64 MiB. It holds the index, filter and data blocks that cold key
	// reads (keys evicted from the Merger's cache) go through. Pebble's
	// default is 8 MiB.
	DefaultCacheSize = 64 << 20
	// pebbleMemTableSize: a larger memtable means fewer flushes and fewer L0
	// tables for a cold read to look at. Pebble's default is 4 MiB.
	pebbleMemTableSize = 4 << 20
	// MemTableMemory is the most the memtables hold, bytes: 16 MiB (4 of
	// 4 MiB; commits stall beyond).
	MemTableMemory = 4 * pebbleMemTableSize
)

// Options size a Store. Zero fields take the defaults.
type Options struct {
	// CacheSize is Pebble's block cache, bytes. Default DefaultCacheSize
	// (64 MiB).
	CacheSize int64
	// DiskReserve is the free space, bytes, that writes leave on the file
	// system of the data directory (space.go): below it Open refuses to
	// open and writes fail with ErrDiskLow. Default DefaultDiskReserve
	// (64 MiB); negative: no reserve. Not checked in memory.
	DiskReserve int64
	// FreeSpace reads the free space under a directory, bytes. Default:
	// statfs (no check where the platform has none). Tests set it.
	FreeSpace func(dir string) (int64, error)
}

// Open opens (creating if missing) the Pebble database in dir on fs:
// vfs.Default for the disk, vfs.NewMem() for a throwaway in-memory store
// (whose commits then skip fsync; dir may be empty), or any vfs.FS (fault
// injection in tests).
func Open(fs vfs.FS, dir string) (*Store, error) {
	return OpenWith(fs, dir, Options{})
}

// OpenWith is Open with the store sized by o.
func OpenWith(fs vfs.FS, dir string, o Options) (*Store, error) {
	if o.CacheSize == 0 {
		o.CacheSize = DefaultCacheSize
	}
	if o.CacheSize < 0 {
		return nil, fmt.Errorf("pebblestore: Options.CacheSize must be positive (0 takes the default), got %d", o.CacheSize)
	}
	if fs == nil {
		return nil, errors.New("pebblestore: no file system (vfs.Default for the disk)")
	}
	_, inMemory := fs.(*vfs.MemFS)
	if dir == "" && !inMemory {
		return nil, errors.New("pebblestore: no data directory")
	}
	if o.DiskReserve == 0 {
		o.DiskReserve = DefaultDiskReserve
	}
	var space *spaceGuard
	if !inMemory {
		// The directory may not exist yet: its nearest existing parent
		// is on the same file system unless a mount is created in between.
		if err := fs.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("pebblestore: open %q: %w", dir, err)
		}
		space = newSpaceGuard(dir, o.DiskReserve, o.FreeSpace)
		if err := space.check(); err != nil {
			return nil, fmt.Errorf("pebblestore: open %q: %w", dir, err)
		}
		if err := foreignDir(fs, dir); err != nil {
			return nil, err
		}
	}
	s, err := openPebbleFS(dir, fs, inMemory, newBGHealth(), o)
	if err != nil {
		return nil, err
	}
	s.space = space
	return s, nil
}

// openPebbleFS opens the database in dir on fs; noSync commits without
// fsync (for an in-memory fs); bg tracks its background errors; o is
// complete (OpenWith).
func openPebbleFS(dir string, fs vfs.FS, noSync bool, bg *bgHealth, o Options) (*Store, error) {
	cache := pebble.NewCache(o.CacheSize)
	defer cache.Unref() // the DB holds its own reference
	opts := &pebble.Options{Logger: quietLogger{}, Cache: cache,
		MemTableSize: pebbleMemTableSize, MemTableStopWritesThreshold: 4}
	for i := range opts.Levels {
		// Bloom filters: a key's first touch is often a miss (a new key), which
		// the filters answer without reading a block of every table.
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	opts.FS = backoffFS{FS: fs, bg: bg}
	opts.EventListener = &pebble.EventListener{
		BackgroundError: bg.fail,
		FlushEnd: func(info pebble.FlushInfo) {
			if info.Err == nil {
				bg.ok()
			}
		},
		CompactionEnd: func(info pebble.CompactionInfo) {
			if info.Err == nil {
				bg.ok()
			}
		},
	}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return nil, openError(dir, err)
	}
	// On an in-memory filesystem there is no disk to sync to: committing
	// with Sync would only wake the WAL flusher for nothing.
	wo := pebble.Sync
	if noSync {
		wo = pebble.NoSync
	}
	return &Store{db: db, writeOpts: wo, bg: bg}, nil
}

// Health reports the store's health (the coordinator's HealthReporter):
// free space below the reserve (ErrDiskLow), else Pebble's last
// background error (a failed flush or compaction) until a flush or
// compaction succeeds, or BackgroundErrorHold passed without another.
func (s *Store) Health() error {
	if err := s.space.check(); err != nil {
		return err
	}
	return s.bg.health()
}

// BackgroundErrors returns how many background failures Pebble reported
// since the store was opened (the coordinator's HealthReporter). Failed
// flushes are retried with backoff (backoff.go), so a full disk adds about
// one per second.
func (s *Store) BackgroundErrors() int64 { return s.bg.errors() }

// FailingSince returns when the current run of background failures began,
// or the zero time while Health reports none (the coordinator's
// HealthReporter).
func (s *Store) FailingSince() time.Time { return s.bg.failingSince() }

// Get implements merge.Store.
func (s *Store) Get(key []byte) ([]byte, bool, error) {
	v, closer, err := s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("pebblestore: get: %w", err)
	}
	out := append([]byte(nil), v...)
	closer.Close()
	return out, true, nil
}

// ConcurrentGet implements merge.ConcurrentStore: Pebble reads are safe
// concurrently with writes.
func (s *Store) ConcurrentGet() bool { return true }

// Commit implements merge.Store with one Pebble batch, synced to disk before it
// returns (on an in-memory filesystem there is nothing to sync).
func (s *Store) Commit(ops []merge.Op) error {
	if len(ops) == 0 {
		return nil
	}
	if err := s.space.check(); err != nil {
		return err
	}
	b := s.db.NewBatch()
	defer b.Close()
	for i := range ops {
		var err error
		switch {
		case ops[i].Delete && ops[i].End != nil:
			err = b.DeleteRange(ops[i].Key, ops[i].End, nil)
		case ops[i].Delete:
			err = b.Delete(ops[i].Key, nil)
		default:
			err = b.Set(ops[i].Key, ops[i].Value, nil)
		}
		if err != nil {
			return fmt.Errorf("pebblestore: batch: %w", err)
		}
	}
	if err := b.Commit(s.writeOpts); err != nil {
		return fmt.Errorf("pebblestore: commit: %w", err)
	}
	return nil
}

// Scan implements merge.Store.
func (s *Store) Scan(prefix, start []byte, fn func(key, value []byte) bool) error {
	lower := prefix
	if len(start) > 0 {
		lower = start
	}
	if len(lower) == 0 {
		lower = nil // Pebble's invariant checks (race builds) read key[0] of a non-nil bound
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return fmt.Errorf("pebblestore: scan: %w", err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		if !fn(it.Key(), it.Value()) {
			break
		}
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("pebblestore: scan: %w", err)
	}
	return nil
}

// Close implements merge.Store; it flushes nothing extra (the WAL is already synced).
func (s *Store) Close() error {
	s.bg.stop() // a flush held by the backoff goes ahead, so Close need not wait for it
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("pebblestore: close: %w", err)
	}
	return nil
}

// Flush starts a flush of the memtable to a table and returns without
// waiting for it (tests of a failing disk use it).
func (s *Store) Flush() error {
	_, err := s.db.AsyncFlush()
	return err
}

// prefixEnd returns the smallest key greater than every key with prefix p,
// or nil when there is none.
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// quietLogger drops Pebble's informational logs and keeps its error logs
// (log/slog's default logger, which `edgelimit coordinator` sets from its
// --log-format and --log-level).
type quietLogger struct{}

func (quietLogger) Infof(string, ...interface{}) {}
func (quietLogger) Errorf(format string, args ...interface{}) {
	slog.Error("pebblestore: " + fmt.Sprintf(format, args...))
}
func (quietLogger) Fatalf(format string, args ...interface{}) {
	panic(fmt.Sprintf("pebblestore: "+format, args...))
}

// GetSorted implements merge.SortedGetter: it reads keys (in ascending
// order) through one iterator, seeking each by its prefix (the whole key:
// Bloom filters answer most misses), and calls fn with each key's index,
// value (valid only during the call) and whether it was found. One
// iterator for a batch's keys opens each table once, where a Get per key
// opens one per level and key.
func (s *Store) GetSorted(keys [][]byte, fn func(i int, value []byte, found bool)) error {
	it, err := s.db.NewIter(nil)
	if err != nil {
		return fmt.Errorf("pebblestore: get: %w", err)
	}
	for i, k := range keys {
		if it.SeekPrefixGE(k) && bytes.Equal(it.Key(), k) {
			v, err := it.ValueAndErr()
			if err != nil {
				it.Close()
				return fmt.Errorf("pebblestore: get: %w", err)
			}
			fn(i, v, true)
			continue
		}
		if err := it.Error(); err != nil {
			it.Close()
			return fmt.Errorf("pebblestore: get: %w", err)
		}
		fn(i, nil, false)
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("pebblestore: get: %w", err)
	}
	return nil
}
