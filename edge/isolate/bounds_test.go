package isolate

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/edgelimit/edgelimit/wasm/core"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestFloodOfUniqueKeysStaysBounded floods an isolate with 1,000,000 unique
// keys and checks the key cap holds and linear memory stays under a bound.
func TestFloodOfUniqueKeysStaysBounded(t *testing.T) {
	ctx := context.Background()
	n := 1_000_000
	cfg := testConfig("flood")
	cfg.MaxKeys = 100_000
	if testing.Short() {
		n, cfg.MaxKeys = 200_000, 20_000
	}
	_, iso := newTestIsolate(t, cfg, Options{MemoryLimitPages: 4096})
	var key [32]byte
	copy(key[:], "customer-")
	var atFull uint32 // memory once the table has been full for a while
	for i := 0; i < n; i++ {
		k := strconv.AppendInt(key[:9], int64(i), 10)
		if _, err := iso.DecideBytes(ctx, 0, k, 1, int64(i)*1000); err != nil {
			t.Fatalf("key %d: %v", i, err)
		}
		if i == 3*int(cfg.MaxKeys) {
			atFull = iso.MemoryBytes()
		}
	}
	st, err := iso.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Keys != cfg.MaxKeys {
		t.Errorf("keys tracked %d, want the cap %d", st.Keys, cfg.MaxKeys)
	}
	if st.Evictions != int64(n)-cfg.MaxKeys {
		t.Errorf("evictions %d, want %d", st.Evictions, int64(n)-cfg.MaxKeys)
	}
	// 100k keys of ~15 bytes: the table and entries take ~18 MB and the
	// collector's heap doubles, so the heap settles at 32 MiB (see
	// memory_test.go). Memory must not grow once the table is full (the
	// limit here is 256 MiB, so only the key cap holds it), and must stay
	// under the bound.
	const bound = 32 << 20
	if m := iso.MemoryBytes(); m > bound || m > atFull {
		t.Errorf("linear memory %d bytes after the flood (%d when the table was full), want no growth and <= %d", m, atFull, bound)
	}
	t.Logf("after %d unique keys: %d keys, %d evictions, memory %d KiB, state %d KiB",
		n, st.Keys, st.Evictions, iso.MemoryBytes()>>10, st.StateBytes>>10)
}

// TestBadInputIsAnErrorNotATrap sends every kind of bad input through the
// scalar fast path and checks each gives its error and the isolate keeps
// working without restarting.
func TestBadInputIsAnErrorNotATrap(t *testing.T) {
	ctx := context.Background()
	_, iso := newTestIsolate(t, testConfig("bad"), Options{})
	cases := []struct {
		name    string
		lim     int
		key     string
		cost    int64
		now     int64
		wantErr error
	}{
		{"unknown limiter", 99, "k", 1, 1, core.ErrUnknownLimiter},
		{"negative limiter", -1, "k", 1, 1, core.ErrUnknownLimiter},
		{"empty key", 0, "", 1, 1, core.ErrEmptyKey},
		{"key too long", 0, strings.Repeat("k", wire.MaxKeyLen+1), 1, 1, core.ErrKeyTooLong},
		{"negative cost", 0, "k", -1, 1, core.ErrBadCost},
		{"overflowing cost", 0, "k", wire.MaxCost + 1, 1, core.ErrBadCost},
		{"negative time", 0, "k", 1, -5, core.ErrBadTime},
	}
	for _, c := range cases {
		_, err := iso.Decide(ctx, c.lim, c.key, c.cost, c.now)
		if !errors.Is(err, c.wantErr) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.wantErr)
		}
	}
	if err := iso.SyncIn(ctx, []byte{0x81, 0xa1}, 1); err == nil {
		t.Error("sync_in of malformed msgpack: no error")
	}
	if err := iso.SyncIn(ctx, (&wire.Reply{Version: wire.Version, Seq: 7}).AppendMsg(nil), 1); !errors.Is(err, core.ErrStaleReply) {
		t.Errorf("sync_in of a reply to no batch: %v", err)
	}
	// Time going backwards is clamped, not an error.
	if _, err := iso.Decide(ctx, 0, "k", 1, 10e9); err != nil {
		t.Fatal(err)
	}
	d, err := iso.Decide(ctx, 0, "k", 1, 1e9)
	if err != nil || d.Reset != 11e9 {
		t.Errorf("backwards time: %+v, %v (want the window of the latest time, reset 11e9)", d, err)
	}
	st, _ := iso.Stats(ctx)
	// The over-long key is refused on the host side, before the module.
	if wantErrs := int64(len(cases)) - 1 + 2; st.ClockBackwards != 1 || st.Errors != wantErrs {
		t.Errorf("stats %+v: want 1 clock-backwards and %d errors", st, wantErrs)
	}
	if iso.Restarts() != 0 {
		t.Errorf("isolate restarted %d times on bad input", iso.Restarts())
	}
}

// TestTrapRestartsOnlyThatIsolate runs isolates with a tiny memory limit so
// a key flood exhausts memory and traps inside the module: the call fails
// with ErrTrap, the isolate restarts with a new id, and its neighbour is
// untouched.
func TestTrapRestartsOnlyThatIsolate(t *testing.T) {
	ctx := context.Background()
	rt, err := NewRuntime(ctx, Options{MemoryLimitPages: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	cfg := testConfig("small")
	a, err := rt.NewIsolate(ctx, cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	cfg.IsolateID = "neighbour"
	b, err := rt.NewIsolate(ctx, cfg, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Decide(ctx, 0, "n", 3, 1); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", 200)
	var trapErr error
	for i := 0; i < 100_000 && trapErr == nil; i++ {
		_, trapErr = a.Decide(ctx, 0, long+strconv.Itoa(i), 1, 1)
	}
	if !errors.Is(trapErr, ErrTrap) {
		t.Fatalf("no trap from memory exhaustion: %v", trapErr)
	}
	if a.Restarts() != 1 || a.ID() != "small/r1" {
		t.Errorf("after the trap: %d restarts, id %q", a.Restarts(), a.ID())
	}
	if d, err := a.Decide(ctx, 0, "again", 1, 2); err != nil || !d.Allowed {
		t.Errorf("restarted isolate: %+v, %v", d, err)
	}
	d, err := b.Decide(ctx, 0, "n", 0, 1)
	if err != nil || d.Remaining != 7 {
		t.Errorf("neighbour lost its state: %+v, %v", d, err)
	}
}

// FuzzKeyBuffer feeds arbitrary keys, limiter indexes, costs and times
// through the fast path: the module never traps, and errors are the
// documented ones.
func FuzzKeyBuffer(f *testing.F) {
	f.Add([]byte("key"), 0, int64(1), int64(1))
	f.Add(make([]byte, 300), 3, int64(-1), int64(-1))
	f.Add([]byte{0xff, 0}, 4, int64(1<<41), int64(1<<62))
	ctx := context.Background()
	_, iso := newTestIsolate(f, testConfig("fuzz"), Options{})
	f.Fuzz(func(t *testing.T, key []byte, lim int, cost, now int64) {
		_, err := iso.DecideBytes(ctx, lim, key, cost, now)
		if errors.Is(err, ErrTrap) {
			t.Fatalf("trap: %v", err)
		}
		if _, err := iso.DecideMulti(ctx, []Check{{Limiter: lim, Key: string(key), Cost: cost}, {Limiter: 0, Key: "g", Cost: 1}}, now); errors.Is(err, ErrTrap) {
			t.Fatalf("trap: %v", err)
		}
	})
}
