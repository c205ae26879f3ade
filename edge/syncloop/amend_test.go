package syncloop

import "testing"

// What a held request that no attempt in flight asks for does: amend the
// batch in flight up to MaxAmends, else wait; with no batch in flight, cut
// the next one unless two amendments of the last are on their way (the
// module would refuse the second one's reply after the cut).
func TestNextAsk(t *testing.T) {
	for _, c := range []struct {
		inFlight bool
		amends   int
		want     Ask
	}{
		{true, 0, AskAmend},
		{true, 1, AskAmend},
		{true, 2, AskWait},
		{true, 3, AskWait},
		{false, 0, AskBatch},
		{false, 1, AskBatch},
		{false, 2, AskWait},
	} {
		if got := NextAsk(c.inFlight, c.amends); got != c.want {
			t.Errorf("NextAsk(%v, %d) = %d, want %d", c.inFlight, c.amends, got, c.want)
		}
	}
}
