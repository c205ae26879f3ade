package merge

import (
	"math"
	"testing"
)

// TestFitShare: the share of sparse isolates' asked cost in requests a unit
// held ahead serves is 1 on a key of requests of cost 1, about the cost
// share of the small requests on a key of mixed costs, and 1 until 8 asks
// and 16 units were asked.
func TestFitShare(t *testing.T) {
	var ones keyState
	for range 200 {
		ones.noteSparseAsk(1)
	}
	if f := ones.fitShare(); f != 1 {
		t.Fatalf("requests of cost 1: share %.3f, want 1", f)
	}
	var fresh keyState
	if fresh.noteSparseAsk(40); fresh.fitShare() != 1 {
		t.Fatalf("one ask of 40 on a fresh key: share %.3f, want 1 (one ask is no evidence)", fresh.fitShare())
	}
	var mixed keyState
	for range 10 {
		mixed.noteSparseAsk(1)
	}
	if f := mixed.fitShare(); f != 1 {
		t.Fatalf("after 10 asks of 1: share %.3f, want 1 (too little seen)", f)
	}
	if mixed.noteSparseAsk(40); math.Abs(mixed.fitShare()-10.0/50) > 0.02 { // (decayed by 1/64 per ask)
		t.Fatalf("then one of 40: share %.3f, want about 0.2", mixed.fitShare())
	}
	// 6 requests of cost 1 for one of 7 and one of 40, in turn.
	for range 100 {
		for _, c := range []int64{1, 1, 1, 7, 1, 1, 1, 40} {
			mixed.noteSparseAsk(c)
		}
	}
	if f, want := mixed.fitShare(), 6.0/53; math.Abs(f-want) > 0.02 {
		t.Fatalf("costs 1, 7 and 40: share %.3f, want about %.3f", f, want)
	}
	// The past decays: the key's requests become cost 1.
	for range 1000 {
		mixed.noteSparseAsk(1)
	}
	if f := mixed.fitShare(); f < 0.99 {
		t.Fatalf("after 1,000 asks of 1: share %.3f, want about 1", f)
	}
}
