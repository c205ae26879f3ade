package proccpu

import (
	"os"
	"testing"
)

// TestOfSelfGrows: the test process's CPU time grows while it computes,
// and a process that does not exist is an error.
func TestOfSelfGrows(t *testing.T) {
	before, err := Of(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	x := uint64(1)
	for after := before; after == before; {
		for i := 0; i < 1e7; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
		if after, err = Of(os.Getpid()); err != nil {
			t.Fatal(err)
		}
		if after < before {
			t.Fatalf("CPU time went back: %v then %v", before, after)
		}
		if after > before {
			break
		}
	}
	if _, err := Of(1 << 30); err == nil {
		t.Fatal("no error for a process that does not exist")
	}
	_ = x
}
