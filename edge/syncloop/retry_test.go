package syncloop

import (
	"testing"
	"time"
)

func TestRetryPolicy(t *testing.T) {
	if _, ok := (RetryPolicy{MaxWait: -1}).Begin(0); ok {
		t.Fatal("a negative wait held a request")
	}
	r, ok := RetryPolicy{}.Begin(5)
	if !ok || r.Deadline() != 5+int64(DefaultRetryWait) {
		t.Fatalf("default policy: %v %v", r, ok)
	}
	// Two replies by default: decided again after each, kept after the first.
	if !r.Replied(10) || !r.Again() {
		t.Fatal("after the first reply: want decide again and keep waiting")
	}
	if !r.Replied(20) || r.Again() {
		t.Fatal("after the second reply: want decide again, then stop")
	}
	// A reply after the deadline denies.
	r, _ = RetryPolicy{MaxWait: time.Millisecond, MaxReplies: 1}.Begin(0)
	if r.Replied(int64(2 * time.Millisecond)) {
		t.Fatal("a reply after the deadline decided again")
	}
}

// A request decided again after the window of its last decision ended
// waits for one reply more, once; in the same window, a second time, or
// after a decision with no window end (a full bucket's reset is not after
// its decision), none.
func TestRetryNewWindow(t *testing.T) {
	r, _ := RetryPolicy{}.Begin(0)
	r.Decided(1000, 0)
	r.NewWindow(999) // still the window it was held in
	if !r.Replied(999) || !r.Again() || !r.Replied(999) || r.Again() {
		t.Fatal("a reply more within the window it was held in")
	}
	r, _ = RetryPolicy{}.Begin(500)
	r.Decided(400, 500) // a full bucket: its reset is past
	r.NewWindow(5000)
	r.Replied(510)
	r.Replied(520)
	if r.Again() {
		t.Fatal("a reply more after a decision with no window end")
	}
	r, _ = RetryPolicy{}.Begin(990)
	r.Decided(1000, 990)
	r.Replied(1010)
	r.NewWindow(1010) // its ask was for the window that ended at 1000
	if !r.Replied(1050) || !r.Again() {
		t.Fatal("after the second reply in a new window: want one more")
	}
	r.Decided(2000, 1010)
	r.NewWindow(2001) // given once
	if !r.Replied(2010) || r.Again() {
		t.Fatal("NewWindow gave more than one reply")
	}
}
