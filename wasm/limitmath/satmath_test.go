package limitmath

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// TestMulDivAgainstBig compares with math/big over random and edge values.
func TestMulDivAgainstBig(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	vals := []int64{0, 1, 2, 3, 7, 1e9, 31 * 24 * 3600 * 1e9, 1 << 40, 1 << 50, math.MaxInt64 - 1, math.MaxInt64}
	for i := 0; i < 20000; i++ {
		vals = append(vals, rng.Int64N(math.MaxInt64))
	}
	for i := 0; i < 30000; i++ {
		a, b, c := vals[rng.IntN(len(vals))], vals[rng.IntN(len(vals))], vals[rng.IntN(len(vals))]
		if c == 0 {
			continue
		}
		p := new(big.Int).Mul(big.NewInt(a), big.NewInt(b))
		down, rem := new(big.Int).QuoRem(p, big.NewInt(c), new(big.Int))
		up := new(big.Int).Set(down)
		if rem.Sign() != 0 {
			up.Add(up, big.NewInt(1))
		}
		clamp := func(x *big.Int) int64 {
			if !x.IsInt64() {
				return math.MaxInt64
			}
			return x.Int64()
		}
		if got, want := MulDiv(a, b, c), clamp(down); got != want {
			t.Fatalf("MulDiv(%d, %d, %d) = %d, want %d", a, b, c, got, want)
		}
		if got, want := MulDivUp(a, b, c), clamp(up); got != want {
			t.Fatalf("MulDivUp(%d, %d, %d) = %d, want %d", a, b, c, got, want)
		}
	}
	if MulDiv(-1, 5, 2) != 0 || MulDiv(5, 5, 0) != 0 {
		t.Fatal("non-positive arguments must give 0")
	}
}

func TestAddSat(t *testing.T) {
	for _, c := range []struct{ a, b, want int64 }{
		{1, 2, 3}, {math.MaxInt64, 1, math.MaxInt64}, {math.MaxInt64 - 5, 10, math.MaxInt64}, {-5, 3, -2},
	} {
		if got := AddSat(c.a, c.b); got != c.want {
			t.Errorf("AddSat(%d, %d) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
