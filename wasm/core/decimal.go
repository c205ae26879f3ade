package core

// Decimal numbers in response headers (headers.go): seconds, resets and
// durations such as "1.5", "60", "0.25" or "1e3".
//
// strconv.ParseFloat read them before, and took about 20 KB of the module
// (its tables for arbitrary precision and hexadecimal floats): a tenth of
// the module's bytes for numbers of a few digits. parseDecimal reads the
// decimal form only, and gives the same float64 as ParseFloat for every
// number of at most 15 significant digits and an exponent within 10^±22
// (decimal_test.go checks both this and, by fuzzing, that anything it
// accepts ParseFloat accepts with a value within 1e-15 of its own).

// Results of parseDecimal besides a number.
const (
	decOK = iota
	decSyntax
	decRange // out of float64's range, as strconv.ErrRange
)

// pow10 holds the powers of ten a float64 holds exactly.
var pow10 = [...]float64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// parseDecimal reads s as [+-]digits[.digits][(e|E)[+-]digits], with at
// least one digit before the exponent. It returns the number and decOK,
// or decSyntax for anything else (inf, nan, hexadecimal, underscores,
// spaces), or decRange for a number too large for float64. Digits past
// the nineteenth significant one are dropped (a relative error below
// 1e-18).
func parseDecimal(s string) (float64, int) {
	i, neg := 0, false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	var mant uint64
	exp, nd, seen, dot := 0, 0, 0, false
digits:
	for ; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '.' && !dot:
			dot = true
			continue
		case c < '0' || c > '9':
			break digits
		}
		seen++
		switch {
		case nd < 19:
			if mant == 0 && c == '0' { // leading zeros are not significant
				if dot {
					exp--
				}
				continue
			}
			mant = mant*10 + uint64(c-'0')
			nd++
			if dot {
				exp--
			}
		case !dot:
			exp++ // a dropped digit before the point
		}
	}
	if seen == 0 {
		return 0, decSyntax
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		eneg := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			eneg = s[i] == '-'
			i++
		}
		if i == len(s) {
			return 0, decSyntax
		}
		e := 0
		for ; i < len(s); i++ {
			c := s[i]
			if c < '0' || c > '9' {
				return 0, decSyntax
			}
			if e < 10000 {
				e = e*10 + int(c-'0')
			}
		}
		if eneg {
			e = -e
		}
		exp += e
	}
	if i != len(s) {
		return 0, decSyntax
	}
	f := float64(mant)
	switch {
	case mant == 0:
	case exp > 0:
		for ; exp > 22; exp -= 22 {
			if f *= pow10[22]; f > maxFloat {
				return 0, decRange
			}
		}
		if f *= pow10[exp]; f > maxFloat {
			return 0, decRange
		}
	case exp < 0:
		for ; exp < -22; exp += 22 {
			f /= pow10[22] // underflows to 0, as ParseFloat's tiny numbers
		}
		f /= pow10[-exp]
	}
	if neg {
		f = -f
	}
	return f, decOK
}

// maxFloat is the largest finite float64.
const maxFloat = 0x1p1023 * (1 + (1 - 0x1p-52))
