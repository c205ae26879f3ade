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
