package sim

import (
	"strings"
	"testing"
)

// A two-column counts file (second, count) was read as alternating bins of
// times and counts without a word, and Unix times failed with an error
// that did not say timestamps are not read: both are refused now, pointing
// at the requests format; counts laid out several to a line still load.
func TestCountsRefuseTimestamps(t *testing.T) {
	for _, tc := range []struct{ data, want string }{
		{"0 50\n1 60\n2 70\n", "every line holds two numbers"},
		{"# t count\n1700000000 50\n1700000001 60\n", "Unix timestamp"},
		{"1700000000.25\n1700000000.5\n", "Unix timestamp"},
	} {
		_, err := parseCounts([]byte(tc.data))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "no timestamps") ||
			!strings.Contains(err.Error(), `trace_format "requests"`) || !strings.HasPrefix(err.Error(), "sim: ") {
			t.Errorf("%q: %v; want an error saying %q, that counts hold no timestamps, and naming the requests format", tc.data, err, tc.want)
		}
	}
	for data, n := range map[string]int{
		"412 398 455\n1203\n388\n":   5,
		"3 4 5\n6 7 8\n":             6,
		"0 50\n":                     2, // one line: counts
		"1 2\n3\n4 5\n":              5,
		"6 6 19 6\n4 4 2 5\n7 8 9 1": 12,
	} {
		c, err := parseCounts([]byte(data))
		if err != nil || len(c) != n {
			t.Errorf("%q: %d counts, %v; want %d", data, len(c), err, n)
		}
	}
}
