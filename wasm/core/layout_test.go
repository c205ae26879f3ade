package core

import (
	"strconv"
	"testing"
	"unsafe"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestLayoutSizes keeps the sizes Stats counts in step with the structs,
// and the entry small: the memory of 100,000 keys is mostly entries (see
// edge/isolate TestMemoryOf100kKeys). The structs have fixed-size fields
// only, so their sizes are the same natively and on wasm32.
func TestLayoutSizes(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"entry", unsafe.Sizeof(entry{}), entrySize},
		{"leaseRec", unsafe.Sizeof(leaseRec{}), leaseSize},
		{"rateRec", unsafe.Sizeof(rateRec{}), rateSize},
	} {
		if c.got != c.want {
			t.Errorf("unsafe.Sizeof(%s{}) = %d, the constant says %d", c.name, c.got, c.want)
		}
	}
}

// TestSideRecordsAreReused floods a small table with long keys of a strict
// and an approximate limiter, syncing as it goes (so approximate keys get
// rate records): evictions must hand their lease and rate records and their
// key buffers back, so the pools never hold more than the key cap, and each
// entry in use must hold the record its limiter needs.
func TestSideRecordsAreReused(t *testing.T) {
	const maxKeys = 64
	c, err := New(wire.Config{Version: wire.Version, IsolateID: "i", MaxKeys: maxKeys, Limiters: []wire.LimiterConfig{
		{Name: "a", Algorithm: wire.FixedWindow, Limit: 1000, Period: 1e9},
		{Name: "s", Algorithm: wire.FixedWindow, Limit: 1000, Period: 1e9, Mode: wire.Strict},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var r Result
	for i := 0; i < 10_000; i++ {
		key := []byte("a-key-longer-than-32-bytes-number-" + strconv.Itoa(i))
		now := int64(i) * 1e6
		if err := c.Decide(i%2, key, 1, now, &r); err != nil {
			t.Fatal(err)
		}
		if i%16 != 15 {
			continue
		}
		out, err := c.SyncOut(now, nil)
		if err != nil || len(out) == 0 {
			t.Fatalf("SyncOut at key %d: %d bytes, %v", i, len(out), err)
		}
		var b wire.Batch
		if err := b.UnmarshalMsg(out); err != nil {
			t.Fatal(err)
		}
		rp := wire.Reply{Version: wire.Version, Seq: b.Seq, At: now}
		for _, d := range b.Entries {
			rp.Entries = append(rp.Entries, wire.View{Limiter: d.Limiter, Key: d.Key, Window: d.Window,
				Count: d.Delta, Lease: 10, Isolates: 1})
		}
		if err := c.SyncIn(rp.AppendMsg(nil), now); err != nil {
			t.Fatal(err)
		}
	}
	tab := &c.tab
	if tab.live != maxKeys {
		t.Fatalf("%d keys tracked, want %d", tab.live, maxKeys)
	}
	leases, rates := 0, 0
	for i := 0; i < tab.n; i++ {
		e := tab.at(int32(i))
		if !e.inUse() {
			if e.aux != 0 || e.flags != 0 {
				t.Errorf("free entry %d holds aux %d, flags %b", i, e.aux, e.flags)
			}
			continue
		}
		switch strict := c.lims[e.lim].strict; {
		case strict && e.aux <= 0:
			t.Errorf("strict entry %d has no lease record (aux %d)", i, e.aux)
		case !strict && e.aux > 0:
			t.Errorf("approximate entry %d has a lease record", i)
		case !strict && e.hasView() != (e.aux < 0):
			t.Errorf("approximate entry %d: view %v, aux %d", i, e.hasView(), e.aux)
		}
		if e.aux > 0 {
			leases++
		}
		if e.aux < 0 {
			rates++
		}
	}
	if rates == 0 || leases == 0 {
		t.Fatalf("%d rate and %d lease records in use: the test no longer exercises both", rates, leases)
	}
	for _, p := range []struct {
		name          string
		n, free, used int
	}{
		{"lease", int(tab.leases.n), len(tab.leases.free), leases},
		{"rate", int(tab.rates.n), len(tab.rates.free), rates},
		{"long key", len(tab.long), len(tab.longFree), maxKeys},
	} {
		if p.n > maxKeys || p.n-p.free != p.used {
			t.Errorf("%s records: %d allocated, %d free, %d in use; want at most %d allocated, all in use or free",
				p.name, p.n, p.free, p.used, maxKeys)
		}
	}
}
