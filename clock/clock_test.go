package clock

import "testing"

func TestManualFiresTimersInOrder(t *testing.T) {
	m := NewManual(100)
	a, b := m.After(50), m.After(10)
	select {
	case <-a:
		t.Fatal("fired before its time")
	case <-b:
		t.Fatal("fired before its time")
	default:
	}
	m.Advance(10)
	select {
	case <-b:
	default:
		t.Fatal("the 10 ns timer did not fire at 110")
	}
	m.Set(90) // never back
	if m.Now() != 110 {
		t.Fatalf("Set moved the clock back to %d", m.Now())
	}
	m.Advance(40)
	select {
	case <-a:
	default:
		t.Fatal("the 50 ns timer did not fire at 150")
	}
	select {
	case <-m.After(0):
	default:
		t.Fatal("After(0) must fire at once")
	}
}

func TestRealMoves(t *testing.T) {
	t0 := Real.Now()
	<-Real.After(1e6)
	if Real.Now() <= t0 {
		t.Fatal("the real clock did not move across a 1 ms wait")
	}
}
