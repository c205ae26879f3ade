package core

import (
	"math"
	"strings"
	"testing"
)

// now is 2025-11-21T04:40:00Z in Unix ns: dates in the headers below are
// relative to it.
const hdrNow = int64(1_763_700_000) * 1e9

func TestParseHeaders(t *testing.T) {
	type want struct {
		retryAfter, limit, remaining, reset, window int64
		ignored                                     string // a substring of the joined reasons; "" means none
	}
	for _, tc := range []struct {
		name string
		h    [][2]string
		want want
	}{
		{"none", nil, want{-1, -1, -1, -1, -1, ""}},
		{"retry-after seconds", [][2]string{{"Retry-After", "30"}}, want{30e9, -1, -1, -1, -1, ""}},
		{"retry-after decimal", [][2]string{{"retry-after", " 1.5 "}}, want{1.5e9, -1, -1, -1, -1, ""}},
		{"retry-after date", [][2]string{{"Retry-After", "Fri, 21 Nov 2025 04:41:00 GMT"}}, want{60e9, -1, -1, -1, -1, ""}},
		{"retry-after date in the past", [][2]string{{"Retry-After", "Fri, 21 Nov 2025 04:39:00 GMT"}}, want{-1, -1, -1, -1, -1, "retry-after: a date in the past"}},
		{"retry-after garbage", [][2]string{{"Retry-After", "soon"}}, want{-1, -1, -1, -1, -1, "retry-after: neither seconds nor an HTTP date"}},
		{"retry-after negative", [][2]string{{"Retry-After", "-5"}}, want{-1, -1, -1, -1, -1, "retry-after: negative or out of range"}},
		{"retry-after huge", [][2]string{{"Retry-After", "99999999999999999999999"}}, want{-1, -1, -1, -1, -1, "retry-after: negative or out of range"}},
		{"retry-after NaN", [][2]string{{"Retry-After", "NaN"}}, want{-1, -1, -1, -1, -1, "retry-after"}},
		{"retry-after bad date", [][2]string{{"Retry-After", "Fri, 32 Nov 2025 04:41:00 GMT"}}, want{-1, -1, -1, -1, -1, "retry-after"}},
		{"x-ratelimit seconds", [][2]string{{"X-RateLimit-Limit", "100"}, {"X-RateLimit-Remaining", "0"}, {"X-RateLimit-Reset", "42"}},
			want{-1, 100, 0, 42e9, -1, ""}},
		{"x-ratelimit epoch seconds (GitHub)", [][2]string{{"x-ratelimit-limit", "5000"}, {"x-ratelimit-remaining", "4999"}, {"x-ratelimit-reset", "1763700600"}},
			want{-1, 5000, 4999, 600e9, -1, ""}},
		{"x-ratelimit epoch ms", [][2]string{{"X-RateLimit-Reset", "1763700001500"}}, want{-1, -1, -1, 1.5e9, -1, ""}},
		{"x-ratelimit epoch in the past", [][2]string{{"X-RateLimit-Reset", "1763600000"}}, want{-1, -1, -1, -1, -1, "x-ratelimit-reset: a date in the past"}},
		{"x-ratelimit list value", [][2]string{{"X-RateLimit-Limit", "100, 100;w=60"}}, want{-1, 100, -1, -1, -1, ""}},
		{"x-ratelimit negative", [][2]string{{"X-RateLimit-Remaining", "-1"}}, want{-1, -1, -1, -1, -1, "x-ratelimit-remaining: negative or out of range"}},
		{"x-ratelimit huge", [][2]string{{"X-RateLimit-Limit", "18446744073709551616"}}, want{-1, -1, -1, -1, -1, "x-ratelimit-limit: negative or out of range"}},
		{"x-ratelimit garbage", [][2]string{{"X-RateLimit-Limit", "lots"}}, want{-1, -1, -1, -1, -1, "x-ratelimit-limit: not a number"}},
		{"reset-after (Discord)", [][2]string{{"X-RateLimit-Reset-After", "0.25"}}, want{-1, -1, -1, 0.25e9, -1, ""}},
		{"openai requests", [][2]string{{"x-ratelimit-limit-requests", "60"}, {"x-ratelimit-remaining-requests", "0"}, {"x-ratelimit-reset-requests", "1m2.5s"}},
			want{-1, 60, 0, 62.5e9, -1, ""}},
		{"openai ms", [][2]string{{"x-ratelimit-reset-requests", "20ms"}}, want{-1, -1, -1, 20e6, -1, ""}},
		{"openai garbage", [][2]string{{"x-ratelimit-reset-requests", "1x"}}, want{-1, -1, -1, -1, -1, "x-ratelimit-reset-requests: not a number"}},
		{"ietf draft 3 separate fields", [][2]string{{"RateLimit-Limit", "10"}, {"RateLimit-Remaining", "3"}, {"RateLimit-Reset", "7"}},
			want{-1, 10, 3, 7e9, -1, ""}},
		{"ietf current", [][2]string{{"RateLimit-Policy", `"burst";q=100;w=60, "daily";q=1000;w=86400`}, {"RateLimit", `"daily";r=0;t=3600, "burst";r=50;t=30`}},
			want{-1, 1000, 0, 3600e9, 86400e9, ""}},
		// Two quotas at 0: the one that resets last binds, in either order
		// (the first bound before: a pause of 3 s or 8 s as they fell).
		{"ietf two exhausted", [][2]string{{"RateLimit-Policy", `"minute";q=10;w=60, "day";q=100;w=86400`}, {"RateLimit", `"minute";r=0;t=3, "day";r=0;t=8`}},
			want{-1, 100, 0, 8e9, 86400e9, ""}},
		{"ietf two exhausted, other order", [][2]string{{"RateLimit-Policy", `"minute";q=10;w=60, "day";q=100;w=86400`}, {"RateLimit", `"day";r=0;t=8, "minute";r=0;t=3`}},
			want{-1, 100, 0, 8e9, 86400e9, ""}},
		{"ietf current one policy", [][2]string{{"RateLimit-Policy", `"default";q=6;w=1`}, {"RateLimit", `"default";r=2;t=1`}},
			want{-1, 6, 2, 1e9, 1e9, ""}},
		{"ietf draft 7 dictionary", [][2]string{{"RateLimit", "limit=100, remaining=50, reset=30"}, {"RateLimit-Policy", "100;w=60"}},
			want{-1, 100, 50, 30e9, 60e9, ""}},
		{"ietf policy only", [][2]string{{"RateLimit-Policy", `"x";q=50;w=10`}}, want{-1, 50, -1, -1, 10e9, ""}},
		// Without a RateLimit item naming one, the tightest policy per
		// second (the tests' period) binds, whatever the order.
		{"ietf policies tightest first", [][2]string{{"RateLimit-Policy", `"second";q=5;w=1, "minute";q=100;w=60`}}, want{-1, 100, -1, -1, 60e9, ""}},
		{"ietf policies tightest last", [][2]string{{"RateLimit-Policy", `"minute";q=100;w=60, "second";q=5;w=1`}}, want{-1, 100, -1, -1, 60e9, ""}},
		{"ietf policies no window is the period", [][2]string{{"RateLimit-Policy", `"a";q=3, "b";q=100;w=10`}}, want{-1, 3, -1, -1, -1, ""}},
		{"ietf policies unreadable skipped", [][2]string{{"RateLimit-Policy", `"a";q=lots;w=1, "b";q=40;w=10`}}, want{-1, 40, -1, -1, 10e9, ""}},
		{"ietf item names a missing policy", [][2]string{{"RateLimit-Policy", `"hour";q=1000;w=3600, "minute";q=10;w=60`}, {"RateLimit", `"day";r=4;t=9`}},
			want{-1, 10, 4, 9e9, 60e9, ""}},
		{"ietf garbage", [][2]string{{"RateLimit", `"a";r=lots;t=-3`}}, want{-1, -1, -1, -1, -1, "ratelimit: not a number"}},
		{"ietf empty", [][2]string{{"RateLimit", ``}, {"RateLimit-Policy", `;;;,,,`}}, want{-1, -1, -1, -1, -1, ""}},
		{"unrelated headers", [][2]string{{"Content-Type", "text/plain"}, {"X-Request-Id", "123"}}, want{-1, -1, -1, -1, -1, ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := parseHeaders(tc.h, hdrNow, 1e9)
			got := want{h.retryAfter, h.limit, h.remaining, h.reset, h.window, strings.Join(h.ignored, "; ")}
			w := tc.want
			if got.retryAfter != w.retryAfter || got.limit != w.limit || got.remaining != w.remaining || got.reset != w.reset || got.window != w.window {
				t.Errorf("got %+v, want %+v", got, w)
			}
			if (w.ignored == "") != (got.ignored == "") || !strings.Contains(got.ignored, w.ignored) {
				t.Errorf("ignored %q, want %q", got.ignored, w.ignored)
			}
		})
	}
}

func TestHTTPDateMatchesCivilCalendar(t *testing.T) {
	for _, tc := range []struct {
		s    string
		unix int64
	}{
		{"Thu, 01 Jan 1970 00:00:00 GMT", 0},
		{"Sun, 06 Nov 1994 08:49:37 GMT", 784111777},
		{"Tue, 29 Feb 2028 23:59:59 GMT", 1835481599},
	} {
		got, ok := parseHTTPDate(tc.s)
		if !ok || got != tc.unix*1e9 {
			t.Errorf("%s: %d %v, want %d", tc.s, got/1e9, ok, tc.unix)
		}
	}
	// Past 2262 a date is as far ahead as a time can be, and a
	// Retry-After of it is out of range like any past 372 days (it
	// wrapped: 2326 read as past, 2611 as two minutes ahead).
	for _, s := range []string{"Thu, 16 Sep 2326 00:00:00 GMT", "Tue, 18 Jun 2611 18:24:56 GMT", "Fri, 31 Dec 9999 23:59:59 GMT"} {
		if got, ok := parseHTTPDate(s); !ok || got != math.MaxInt64 {
			t.Errorf("%s: %d %v, want MaxInt64", s, got, ok)
		}
		h := parseHeaders([][2]string{{"Retry-After", s}}, hdrNow, 1e9)
		if h.retryAfter != -1 || !strings.Contains(strings.Join(h.ignored, "; "), "out of range") {
			t.Errorf("Retry-After %s: %d ns, ignored %q; want it ignored as out of range", s, h.retryAfter, h.ignored)
		}
	}
}

// FuzzParseHeaders: no input panics, every value read is in range, and a
// value is either read or ignored with a reason.
func FuzzParseHeaders(f *testing.F) {
	f.Add("Retry-After", "30", "RateLimit", `"a";r=1;t=2`)
	f.Add("X-RateLimit-Reset", "1763700600", "RateLimit-Policy", "100;w=60")
	f.Add("x-ratelimit-reset-requests", "6m0s", "RateLimit", "limit=1, remaining=0, reset=9")
	f.Fuzz(func(t *testing.T, n1, v1, n2, v2 string) {
		h := parseHeaders([][2]string{{n1, v1}, {n2, v2}}, hdrNow, 1e9)
		for _, v := range []int64{h.retryAfter, h.reset, h.window} {
			if v < -1 || v > maxHeaderSeconds*1e9 {
				t.Fatalf("duration %d out of range: %+v", v, h)
			}
		}
		for _, v := range []int64{h.limit, h.remaining} {
			if v < -1 || v > 1<<50 {
				t.Fatalf("count %d out of range: %+v", v, h)
			}
		}
	})
}
