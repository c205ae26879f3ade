package core

import (
	"errors"
	"math"
	"strconv"
	"testing"
)

// Numbers of up to 15 significant digits with exponents within 10^±22
// read exactly as strconv.ParseFloat reads them.
func TestParseDecimalMatchesParseFloat(t *testing.T) {
	cases := []string{"0", "1", "60", "1.5", "0.25", "0.001", ".5", "5.", "+2", "-3.75", "007", "0.000",
		"1e3", "1E3", "2.5e-3", "1e+2", "123456789012345", "0.123456789012345", "3600.5", "1e22", "1e-22",
		"86400", "1700000000", "1700000000123", "1700000000.123", "9007199254740993", "12345678901234567890123"}
	for m := 1; m < 100000; m = m*7 + 3 {
		for _, e := range []int{-22, -9, -3, -1, 0, 1, 3, 9, 22} {
			cases = append(cases, strconv.Itoa(m)+"e"+strconv.Itoa(e))
		}
	}
	for _, s := range cases {
		want, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("ParseFloat(%q): %v", s, err)
		}
		got, r := parseDecimal(s)
		if r != decOK {
			t.Errorf("parseDecimal(%q): result %d, want a number", s, r)
			continue
		}
		if got != want && (significant(s) <= 15 || math.Abs(got-want) > 1e-15*math.Abs(want)) {
			t.Errorf("parseDecimal(%q) = %v, ParseFloat %v", s, got, want)
		}
	}
}

// significant counts s's significant digits (those after leading zeros).
func significant(s string) int {
	n, lead := 0, true
	for _, c := range s {
		switch {
		case c == 'e' || c == 'E':
			return n
		case c < '0' || c > '9' || lead && c == '0':
		default:
			lead = false
			n++
		}
	}
	return n
}

func TestParseDecimalRefuses(t *testing.T) {
	for _, s := range []string{"", ".", "+", "-", "e3", "1e", "1e+", "1.2.3", "1,5", " 1", "1 ", "inf", "Inf",
		"NaN", "0x10", "0x1p-2", "1_000", "1s", "--1", "1e3.5", "١"} {
		if f, r := parseDecimal(s); r != decSyntax {
			t.Errorf("parseDecimal(%q) = %v, %d; want a syntax error", s, f, r)
		}
	}
	for _, s := range []string{"1e309", "2e308", "1e99999999999"} {
		if f, r := parseDecimal(s); r != decRange {
			t.Errorf("parseDecimal(%q) = %v, %d; want out of range", s, f, r)
		}
		if _, err := strconv.ParseFloat(s, 64); !errors.Is(err, strconv.ErrRange) {
			t.Errorf("ParseFloat(%q): %v, want ErrRange too", s, err)
		}
	}
	if f, r := parseDecimal("1e-400"); r != decOK || f != 0 {
		t.Errorf("parseDecimal(1e-400) = %v, %d; want 0", f, r)
	}
}

// Whatever parseDecimal accepts, ParseFloat accepts with (nearly) the same
// value; what it reads as out of range, ParseFloat does too.
func FuzzParseDecimal(f *testing.F) {
	for _, s := range []string{"1.5", "0.001", "1e3", "-2.5e-3", "1e309", "inf", "12345678901234567890.5", ".5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, r := parseDecimal(s)
		want, err := strconv.ParseFloat(s, 64)
		switch r {
		case decOK:
			if err != nil && !(errors.Is(err, strconv.ErrRange) && got == 0) {
				t.Fatalf("parseDecimal(%q) = %v, ParseFloat: %v", s, got, err)
			}
			if d := math.Abs(got - want); d > 1e-14*math.Abs(want) && d > 1e-300 {
				t.Fatalf("parseDecimal(%q) = %v, ParseFloat %v", s, got, want)
			}
		case decRange:
			if !errors.Is(err, strconv.ErrRange) {
				t.Fatalf("parseDecimal(%q) out of range, ParseFloat: %v, %v", s, want, err)
			}
		}
	})
}
