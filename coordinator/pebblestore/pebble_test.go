package pebblestore

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/edgelimit/edgelimit/coordinator/merge"
)

var _ merge.ConcurrentStore = (*Store)(nil)

// TestStoreOps: sets, deletes and range deletes commit atomically; Get
// copies; Scan walks a prefix in order from start and stops when told.
func TestStoreOps(t *testing.T) {
	s, err := Open(vfs.NewMem(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var ops []merge.Op
	for _, k := range []string{"a1", "a2", "a3", "b1", "l1", "l2"} {
		ops = append(ops, merge.Op{Key: []byte(k), Value: []byte("v" + k)})
	}
	if err := s.Commit(ops); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit([]merge.Op{{Key: []byte("a2"), Delete: true}, {Key: []byte("l"), End: []byte("m"), Delete: true}}); err != nil {
		t.Fatal(err)
	}
	v, ok, err := s.Get([]byte("a1"))
	if err != nil || !ok || string(v) != "va1" {
		t.Fatalf("get a1: %q %v %v", v, ok, err)
	}
	for _, k := range []string{"a2", "l1", "l2", "zz"} {
		if _, ok, err := s.Get([]byte(k)); ok || err != nil {
			t.Fatalf("get %s after delete: %v %v", k, ok, err)
		}
	}
	var got []string
	scan := func(prefix, start string, n int) string {
		got = got[:0]
		if err := s.Scan([]byte(prefix), []byte(start), func(k, v []byte) bool {
			got = append(got, fmt.Sprintf("%s=%s", k, v))
			return len(got) < n
		}); err != nil {
			t.Fatal(err)
		}
		return strings.Join(got, ",")
	}
	if g := scan("a", "", 10); g != "a1=va1,a3=va3" {
		t.Fatalf("scan a: %s", g)
	}
	if g := scan("a", "a2", 10); g != "a3=va3" {
		t.Fatalf("scan a from a2: %s", g)
	}
	if g := scan("", "", 2); g != "a1=va1,a3=va3" {
		t.Fatalf("scan all, stop at 2: %s", g)
	}
	if !s.ConcurrentGet() || s.Health() != nil || s.BackgroundErrors() != 0 {
		t.Fatal("a fresh store: concurrent gets, healthy, no background errors")
	}
}

func TestOpenNeedsAFileSystemAndADirectory(t *testing.T) {
	if _, err := Open(nil, "x"); err == nil || !strings.HasPrefix(err.Error(), "pebblestore: ") {
		t.Fatalf("no fs: %v", err)
	}
	if _, err := Open(vfs.Default, ""); err == nil {
		t.Fatal("no directory on disk: opened")
	}
}

func TestPrefixEnd(t *testing.T) {
	for _, tc := range []struct{ in, want []byte }{
		{[]byte("ab"), []byte("ac")}, {[]byte{'a', 0xff}, []byte("b")}, {[]byte{0xff, 0xff}, nil}, {nil, nil},
	} {
		if got := prefixEnd(tc.in); string(got) != string(tc.want) {
			t.Errorf("prefixEnd(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestBackgroundHealth: a background error is reported until a flush or
// compaction succeeds, or until BackgroundErrorHold passed.
func TestBackgroundHealth(t *testing.T) {
	now := time.Unix(1000, 0)
	h := &bgHealth{now: func() time.Time { return now }}
	disk := errors.New("no space left on device")
	h.fail(disk)
	if err := h.health(); !errors.Is(err, disk) || !errors.Is(err, errBackground) || h.errors() != 1 {
		t.Fatalf("after a failure: %v (%d)", err, h.errors())
	}
	h.ok()
	if err := h.health(); err != nil {
		t.Fatalf("after a success: %v", err)
	}
	h.fail(disk)
	now = now.Add(BackgroundErrorHold + time.Second)
	if err := h.health(); err != nil || h.errors() != 2 {
		t.Fatalf("after the hold: %v (%d)", err, h.errors())
	}
}

var _ merge.SortedGetter = (*Store)(nil)

// TestGetSorted: one iterator reads sorted keys, in the memtable and in
// tables, found or not (a key that is a prefix of another is not found by
// the longer one's record), as Get does.
func TestGetSorted(t *testing.T) {
	s, err := Open(vfs.NewMem(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	put := func(kv ...string) {
		var ops []merge.Op
		for i := 0; i < len(kv); i += 2 {
			ops = append(ops, merge.Op{Key: []byte(kv[i]), Value: []byte(kv[i+1])})
		}
		if err := s.Commit(ops); err != nil {
			t.Fatal(err)
		}
	}
	put("k1", "v1", "k3", "v3", "k30", "v30")
	if err := s.db.Flush(); err != nil { // k1, k3, k30 in a table
		t.Fatal(err)
	}
	put("k2", "v2", "k4", "")
	if err := s.Commit([]merge.Op{{Key: []byte("k3"), Delete: true}}); err != nil {
		t.Fatal(err)
	}
	keys := []string{"k0", "k1", "k2", "k3", "k30", "k4", "k4", "k5"}
	var in [][]byte
	for _, k := range keys {
		in = append(in, []byte(k))
	}
	seen := 0
	if err := s.GetSorted(in, func(i int, v []byte, found bool) {
		seen++
		want, ok, err := s.Get(in[i])
		if err != nil || found != ok || string(v) != string(want) {
			t.Errorf("%s: %q %v, Get says %q %v %v", keys[i], v, found, want, ok, err)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if seen != len(keys) {
		t.Fatalf("%d calls for %d keys", seen, len(keys))
	}
}
