package pebblestore

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/edgelimit/edgelimit/coordinator/history"
	"github.com/edgelimit/edgelimit/coordinator/merge"
)

// TestDiskReserve: below the reserve Open refuses, and an open store
// refuses commits and history writes and reports it as its health, until
// the space comes back; nothing refused was written.
func TestDiskReserve(t *testing.T) {
	var free atomic.Int64
	free.Store(10 << 20)
	o := Options{DiskReserve: 16 << 20, FreeSpace: func(string) (int64, error) { return free.Load(), nil }}
	dir := t.TempDir()
	if _, err := OpenWith(vfs.Default, dir, o); !errors.Is(err, ErrDiskLow) {
		t.Fatalf("open below the reserve: %v", err)
	}
	free.Store(100 << 20)
	s, err := OpenWith(vfs.Default, dir, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	clk := time.Now()
	s.space.now = func() time.Time { return clk }
	put := func(k string) error { return s.Commit([]merge.Op{{Key: []byte(k), Value: []byte("v")}}) }
	if err := put("a"); err != nil {
		t.Fatal(err)
	}
	free.Store(1 << 20)
	if err := put("b"); err != nil {
		t.Fatalf("within one reading the old one stands: %v", err)
	}
	clk = clk.Add(spaceCheckEvery)
	if err := put("c"); !errors.Is(err, ErrDiskLow) {
		t.Fatalf("commit below the reserve: %v", err)
	}
	if err := s.Health(); !errors.Is(err, ErrDiskLow) {
		t.Fatalf("health below the reserve: %v", err)
	}
	if err := s.AddHistory("", []history.Point{{Res: history.Minute, Bucket: 1}}); !errors.Is(err, ErrDiskLow) {
		t.Fatalf("history below the reserve: %v", err)
	}
	if _, found, _ := s.Get([]byte("c")); found {
		t.Fatal("a refused commit was written")
	}
	free.Store(16 << 20)
	clk = clk.Add(spaceCheckEvery)
	if err := put("c"); err != nil {
		t.Fatalf("at the reserve: %v", err)
	}
	if err := s.Health(); err != nil {
		t.Fatalf("health at the reserve: %v", err)
	}
	if _, found, _ := s.Get([]byte("c")); !found {
		t.Fatal("commit after the space came back missing")
	}
	// In memory there is nothing to check.
	m, err := OpenWith(vfs.NewMem(), "", Options{DiskReserve: 1 << 40, FreeSpace: o.FreeSpace})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Commit([]merge.Op{{Key: []byte("k"), Value: []byte("v")}}); err != nil {
		t.Fatal(err)
	}
}
