package pebblestore

import (
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/edgelimit/edgelimit/coordinator/internal/coordtest"
	"github.com/edgelimit/edgelimit/coordinator/merge"
)

func TestBackoffDelay(t *testing.T) {
	for n := 1; n <= 40; n++ {
		d := min(FlushBackoffMin<<min(n-1, 20), FlushBackoffMax)
		for range 50 {
			if got := backoffDelay(n); got < d/2 || got > d {
				t.Fatalf("failure %d: %s, want within [%s, %s]", n, got, d/2, d)
			}
		}
	}
}

// TestBackoffRun: each failure of a run holds the next attempt longer; a
// success ends the run.
func TestBackoffRun(t *testing.T) {
	now := time.Unix(1000, 0)
	h := newBGHealth()
	h.now = func() time.Time { return now }
	disk := fmt.Errorf("flush: %w", syscall.ENOSPC)
	for n := 1; n <= 12; n++ {
		h.fail(disk)
		d := min(FlushBackoffMin<<(n-1), FlushBackoffMax)
		if hold := h.retryAt.Sub(now); hold < d/2 || hold > d {
			t.Fatalf("failure %d holds %s, want within [%s, %s]", n, hold, d/2, d)
		}
		if !h.failingSince().Equal(time.Unix(1000, 0)) {
			t.Fatalf("failing since %s", h.failingSince())
		}
		now = now.Add(300 * time.Millisecond)
	}
	h.ok()
	if h.run != 0 || !h.retryAt.IsZero() || !h.failingSince().IsZero() || h.health() != nil {
		t.Fatalf("after a success: run %d, retry at %s, since %s, %v", h.run, h.retryAt, h.failingSince(), h.health())
	}
	h.stop()
	h.stop() // twice is fine
	h.fail(disk)
	h.wait() // returns at once once stopped
}

// TestDiskFullBacksOffFlushes: Pebble on a disk whose table writes fail
// (ENOSPC) while commits still reach the WAL. Over 600 ms of full disk,
// Pebble, which retries a failed flush at once, starts only a handful of
// flushes (thousands without the backoff: BenchmarkDiskFull); the store
// reports the failure meanwhile, every acknowledged commit is kept, and
// the store is healthy again once a flush succeeds after space returns.
func TestDiskFullBacksOffFlushes(t *testing.T) {
	disk := coordtest.NewDiskFull(vfs.NewMem())
	s, err := Open(disk.FS, "db")
	if err != nil {
		t.Fatal(err)
	}
	acked := 0
	commit := func() {
		t.Helper()
		if err := s.Commit([]merge.Op{{Key: fmt.Appendf(nil, "k%05d", acked), Value: []byte("v")}}); err != nil {
			t.Fatal(err)
		}
		acked++
	}
	for range 100 {
		commit()
	}
	disk.Full.Store(true)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := 0; s.Health() == nil; i++ {
		if i == 500 {
			t.Fatal("no background error 5 s after a flush on a full disk")
		}
		time.Sleep(10 * time.Millisecond)
	}
	from, errs := disk.Attempts(), s.BackgroundErrors()
	for range 100 { // the WAL has room: commits go on meanwhile
		commit()
	}
	time.Sleep(600 * time.Millisecond)
	attempts := disk.Attempts() - from
	err = s.Health()
	t.Logf("600 ms of full disk: %d flushes started, %d background errors; health: %v", attempts,
		s.BackgroundErrors()-errs, err)
	if !errors.Is(err, syscall.ENOSPC) || !errors.Is(err, errBackground) || s.FailingSince().IsZero() {
		t.Fatalf("full disk: health %v, failing since %s", err, s.FailingSince())
	}
	// 2.5+5+10+20+40+80+160+320 ms: at most 8 in 600 ms after the first.
	if attempts > 12 {
		t.Fatalf("%d flushes started in 600 ms of full disk: not backed off", attempts)
	}
	disk.Full.Store(false)
	for i := 0; s.Health() != nil; i++ {
		if i == 500 {
			t.Fatalf("still unhealthy 5 s after space returned: %v", s.Health())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !s.FailingSince().IsZero() {
		t.Fatalf("healthy, failing since %s", s.FailingSince())
	}
	commit()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Every acknowledged commit survives a reopen.
	if s, err = Open(disk.FS, "db"); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range acked {
		if _, ok, err := s.Get(fmt.Appendf(nil, "k%05d", i)); !ok || err != nil {
			t.Fatalf("k%05d lost: %v %v", i, ok, err)
		}
	}
}

// TestCloseWhileDiskFull: a store closed while its flushes fail keeps
// what it acknowledged (in the WAL) for the next open.
func TestCloseWhileDiskFull(t *testing.T) {
	disk := coordtest.NewDiskFull(vfs.NewMem())
	s, err := Open(disk.FS, "db")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Commit([]merge.Op{{Key: []byte("k"), Value: []byte("v")}}); err != nil {
		t.Fatal(err)
	}
	disk.Full.Store(true)
	s.Flush()
	for i := 0; s.BackgroundErrors() < 3; i++ {
		if i == 500 {
			t.Fatal("fewer than 3 background errors 5 s after a flush on a full disk")
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.Close() // ends the wait of the flush held by the backoff
	disk.Full.Store(false)
	s, err = Open(disk.FS, "db")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, ok, err := s.Get([]byte("k")); !ok || err != nil {
		t.Fatalf("k lost: %v %v", ok, err)
	}
}

// BenchmarkDiskFull measures what a full disk costs while it stays full:
// Pebble on disk (a temporary directory) with 4 MiB of commits in its
// memtable, then 2 s in which table writes fail with ENOSPC
// (coordtest.DiskFull) after a flush was asked for. It reports the process's
// CPU over those 2 s, as a share of one core (getrusage), and the failed
// flushes per second, with the store's backoff and without it (Pebble
// alone retries a failed flush at once).
//
//	go test -run '^$' -bench DiskFull -benchtime 1x ./coordinator/pebblestore/
func BenchmarkDiskFull(b *testing.B) {
	const full = 2 * time.Second
	for _, backoff := range []bool{true, false} {
		name := "backoff"
		if !backoff {
			name = "none"
		}
		b.Run(name, func(b *testing.B) {
			for range b.N {
				disk := coordtest.NewDiskFull(vfs.Default)
				bg := newBGHealth()
				bg.noBackoff = !backoff
				s, err := openPebbleFS(b.TempDir(), disk.FS, false, bg, Options{CacheSize: DefaultCacheSize})
				if err != nil {
					b.Fatal(err)
				}
				ops := make([]merge.Op, 0, 1000)
				for i := range 4000 {
					ops = append(ops, merge.Op{Key: fmt.Appendf(nil, "key-%08d", i), Value: make([]byte, 1000)})
					if len(ops) == cap(ops) {
						if err := s.Commit(ops); err != nil {
							b.Fatal(err)
						}
						ops = ops[:0]
					}
				}
				disk.Full.Store(true)
				errs, cpu, start := s.BackgroundErrors(), coordtest.CPUTime(b), time.Now()
				if err := s.Flush(); err != nil {
					b.Fatal(err)
				}
				time.Sleep(full)
				cpu, el, failed := coordtest.CPUTime(b)-cpu, time.Since(start), s.BackgroundErrors()-errs
				disk.Full.Store(false)
				s.Close()
				b.ReportMetric(100*cpu.Seconds()/el.Seconds(), "cpu-%")
				b.ReportMetric(float64(failed)/el.Seconds(), "failed-flushes/s")
				b.Logf("%s: %s of full disk: %s of CPU (%.1f%% of a core), %d failed flushes (%.0f/s)",
					name, el.Round(time.Millisecond), cpu.Round(time.Millisecond), 100*cpu.Seconds()/el.Seconds(),
					failed, float64(failed)/el.Seconds())
			}
		})
	}
}
