package sim

import (
	"testing"
	"time"
)

// A bucket key is measured against an exact bucket: 10/s with a burst of
// 20 admits 20 of 25 offered at once, then only the refill, 10 a second;
// cost admitted past the burst is over by that much, whichever window it
// falls in.
func TestBucketTruthIsAnExactBucket(t *testing.T) {
	const s = int64(time.Second)
	k := &keyInfo{period: s, perUnit: s / 10, tol: 2 * s}
	var b bucketTruth
	for range 25 {
		b.offer(k, 0, 1)
		b.admit(k, 0, 1)
	}
	if b.exact != 20 || b.over != 5 {
		t.Fatalf("25 at once: exact %d, over %d; want 20, 5", b.exact, b.over)
	}
	b.roll()
	for range 15 {
		b.offer(k, s, 1)
	}
	// The admitted cost's bucket was 5 past its burst and has refilled
	// 10 since: one more unit fits.
	b.admit(k, s, 1)
	if b.exact != 10 || b.over != 0 {
		t.Fatalf("15 offered a second later: exact %d, over %d; want 10, 0 (the refill covers the next unit)", b.exact, b.over)
	}
	b.roll()
	for range 10 {
		b.admit(k, s, 1) // 36 admitted by 1 s, where a bucket holds 20 and refills 10
	}
	if b.over != 6 {
		t.Fatalf("11 at 1 s after 25 at 0: over %d, want 6", b.over)
	}
}

// Central decides every request on an exact bucket, so against the exact
// bucket it leaves nothing unserved, also in a burst's second second,
// where the bucket has only its refill to give (against the window's limit
// plus the burst, as the simulator measured buckets before, those seconds
// read as unserved: central's utilisation was 83%).
func TestBucketKeysCentralServesAll(t *testing.T) {
	sc := small(t, 16, 100, 400, "poisson", 20*time.Second)
	sc.Config.Limiters[0].Algorithm = "token_bucket"
	sc.Config.Limiters[0].Burst = 50
	sc.Traffic[0].Pattern = Pattern{Kind: "onoff", On: Duration(2 * time.Second), Off: Duration(3 * time.Second)}
	if err := sc.Prepare(); err != nil {
		t.Fatal(err)
	}
	r, err := testSim(t).Run(t.Context(), sc, Central, 100*time.Millisecond, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Unserved > r.Admitted/200 || r.Utilisation < 99.5 || r.WorstOverrun != 0 {
		t.Errorf("central on a bucket: unserved %d of %d admitted, utilisation %.1f%%, worst %d over", r.Unserved, r.Admitted, r.Utilisation, r.WorstOverrun)
	}
}
