package core

import (
	"math"
	"strconv"
	"strings"
)

// upHeaders is what an upstream's answer says about its rate limit, read
// from its headers by parseHeaders. Unknown values are -1.
type upHeaders struct {
	retryAfter int64 // Retry-After, ns from now
	limit      int64 // the quota of the upstream's window
	remaining  int64 // what is left of it
	reset      int64 // ns from now until the quota is full again
	window     int64 // the upstream's window, ns
	ignored    []string
}

// maxHeaderSeconds bounds a duration a header may give (about 372 days):
// anything longer is ignored as hostile or broken.
const maxHeaderSeconds = 372 * 24 * 3600

// parseHeaders reads the rate-limit headers of an answer received at now
// (ns; Unix time for dates). It understands Retry-After (seconds or an
// HTTP date), the IETF RateLimit and RateLimit-Policy fields (structured
// "name";r=..;t=.. and q=..;w=.., and the older limit=, remaining=, reset=
// form), RateLimit-Limit/-Remaining/-Reset, X-RateLimit-Limit/-Remaining/
// -Reset (reset in seconds from now, or an epoch in seconds or ms),
// X-RateLimit-Reset-After and the -requests variants
// (X-RateLimit-Reset-Requests: "6m0s"). Values it cannot read, negative or
// out-of-range values and dates in the past are ignored, each with a
// reason in ignored; nothing panics.
//
// Of several policies, the one named by the RateLimit item that binds is
// read; without one, the tightest at period (ns, the limiter's): the least
// quota per period, a policy without a window taken as one of period.
func parseHeaders(headers [][2]string, now, period int64) upHeaders {
	h := upHeaders{retryAfter: -1, limit: -1, remaining: -1, reset: -1, window: -1}
	var policy, rl string
	for _, kv := range headers {
		name := strings.ToLower(strings.TrimSpace(kv[0]))
		v := strings.TrimSpace(kv[1])
		switch name {
		case "retry-after":
			h.set(&h.retryAfter, name, parseRetryAfter(v, now))
		case "x-ratelimit-limit", "ratelimit-limit", "x-rate-limit-limit", "x-ratelimit-limit-requests":
			h.set(&h.limit, name, firstCount(v))
		case "x-ratelimit-remaining", "ratelimit-remaining", "x-rate-limit-remaining", "x-ratelimit-remaining-requests":
			h.set(&h.remaining, name, firstCount(v))
		case "x-ratelimit-reset", "ratelimit-reset", "x-rate-limit-reset":
			h.set(&h.reset, name, parseReset(firstToken(v), now))
		case "x-ratelimit-reset-after":
			h.set(&h.reset, name, parseSeconds(firstToken(v)))
		case "x-ratelimit-reset-requests":
			h.set(&h.reset, name, parseDuration(v))
		case "ratelimit-policy":
			policy = v
		case "ratelimit":
			rl = v
		}
	}
	if rl != "" {
		h.structured(rl, policy, period)
	} else if policy != "" {
		h.structured("", policy, period)
	}
	return h
}

// errValue is why a header value was ignored.
type errValue string

// value is a parsed header value or why it was ignored.
type value struct {
	v   int64
	why errValue
}

func (h *upHeaders) set(dst *int64, name string, v value) {
	if v.why != "" {
		h.ignored = append(h.ignored, name+": "+string(v.why))
		return
	}
	*dst = v.v
}

const (
	whyNumber = errValue("not a number")
	whyRange  = errValue("negative or out of range")
	whyPast   = errValue("a date in the past")
	whyDate   = errValue("neither seconds nor an HTTP date")
)

// firstToken is v up to its first ',' or ';' (a list's first member).
func firstToken(v string) string {
	if i := strings.IndexAny(v, ",;"); i >= 0 {
		v = v[:i]
	}
	return strings.TrimSpace(v)
}

// firstCount reads a count (a non-negative integer) from v's first member.
func firstCount(v string) value {
	n, err := strconv.ParseInt(firstToken(v), 10, 64)
	switch {
	case err != nil && isRange(err):
		return value{why: whyRange}
	case err != nil:
		return value{why: whyNumber}
	case n < 0 || n > 1<<50:
		return value{why: whyRange}
	}
	return value{v: n}
}

func isRange(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// parseSeconds reads a non-negative number of seconds (decimals allowed) as ns.
func parseSeconds(v string) value {
	f, r := parseDecimal(v)
	switch {
	case r == decRange:
		return value{why: whyRange}
	case r != decOK:
		return value{why: whyNumber}
	case f < 0 || f > maxHeaderSeconds:
		return value{why: whyRange}
	}
	return value{v: int64(f * 1e9)}
}

// parseRetryAfter reads Retry-After: delay-seconds or an HTTP date.
func parseRetryAfter(v string, now int64) value {
	if v == "" {
		return value{why: whyNumber}
	}
	if c := v[0]; c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' {
		return parseSeconds(v)
	}
	t, ok := parseHTTPDate(v)
	if !ok {
		return value{why: whyDate}
	}
	return untilEpoch(t, now)
}

// untilEpoch is the time from now until the Unix time t (ns).
func untilEpoch(t, now int64) value {
	d := t - now
	switch {
	case d < 0:
		return value{why: whyPast}
	case d > maxHeaderSeconds*1e9:
		return value{why: whyRange}
	}
	return value{v: d}
}

// parseReset reads a reset time: seconds from now, or an epoch in seconds
// (>= 10^9) or milliseconds (>= 10^12), as GitHub and others send it.
func parseReset(v string, now int64) value {
	f, r := parseDecimal(v)
	switch {
	case r == decRange:
		return value{why: whyRange}
	case r != decOK:
		return value{why: whyNumber}
	case f >= 1e12 && f < 1e14:
		return untilEpoch(int64(f*1e6), now)
	case f >= 1e9 && f < 1e11:
		return untilEpoch(int64(f*1e9), now)
	}
	return parseSeconds(v)
}

// parseDuration reads a Go-style duration ("1s", "6m0s", "20ms",
// "1h2m3.5s") as OpenAI's x-ratelimit-reset-requests carries it; a plain
// number is seconds.
func parseDuration(v string) value {
	if v == "" {
		return value{why: whyNumber}
	}
	if c := v[len(v)-1]; c >= '0' && c <= '9' {
		return parseSeconds(v)
	}
	var total float64
	for v != "" {
		i := 0
		for i < len(v) && (v[i] >= '0' && v[i] <= '9' || v[i] == '.') {
			i++
		}
		if i == 0 {
			return value{why: whyNumber}
		}
		f, r := parseDecimal(v[:i])
		if r != decOK {
			return value{why: whyNumber}
		}
		v = v[i:]
		j := 0
		for j < len(v) && (v[j] < '0' || v[j] > '9') && v[j] != '.' {
			j++
		}
		unit := 0.0
		switch v[:j] {
		case "h":
			unit = 3600
		case "m":
			unit = 60
		case "s":
			unit = 1
		case "ms":
			unit = 1e-3
		case "us", "µs":
			unit = 1e-6
		case "ns":
			unit = 1e-9
		default:
			return value{why: whyNumber}
		}
		v = v[j:]
		total += f * unit
		if total > maxHeaderSeconds {
			return value{why: whyRange}
		}
	}
	return value{v: int64(total * 1e9)}
}

// structured reads the IETF fields: rl is RateLimit, policy
// RateLimit-Policy. The current draft's items are `"name";r=R;t=T` and
// `"name";q=Q;w=W`; draft 7 wrote `limit=L, remaining=R, reset=T` and
// policies as `Q;w=W`. With several items, the one with the least
// remaining binds (of those, the one that resets last), with the policy of
// the same name (else the tightest at period, see tightest).
func (h *upHeaders) structured(rl, policy string, period int64) {
	bind := ""
	if rl != "" {
		items := sfItems(rl)
		if len(items) == 1 && items[0].name == "" && len(items[0].params) > 1 && items[0].has("remaining") {
			// Draft 7: one dictionary, limit=, remaining=, reset=.
			it := items[0]
			h.take(it, "limit", "ratelimit", &h.limit, firstCount)
			h.take(it, "remaining", "ratelimit", &h.remaining, firstCount)
			h.take(it, "reset", "ratelimit", &h.reset, parseSeconds)
		} else {
			best := -1
			bestR, bestT := int64(-1), int64(-1)
			for i, it := range items {
				r := int64(-1)
				h.take(it, "r", "ratelimit", &r, firstCount)
				if r < 0 || best >= 0 && r > bestR {
					continue
				}
				// Of items as low, the one that resets last binds: two
				// quotas at 0 ("minute" for 3 s, "day" for 8) paused 3 s
				// or 8 s as their order fell.
				t := int64(-1)
				if v, ok := it.get("t"); ok {
					if pv := parseSeconds(v); pv.why == "" {
						t = pv.v
					}
				}
				if best < 0 || r < bestR || t > bestT {
					best, bestR, bestT = i, r, t
				}
			}
			if best >= 0 {
				h.remaining = bestR
				h.take(items[best], "t", "ratelimit", &h.reset, parseSeconds)
				bind = items[best].name
			}
		}
	}
	if policy == "" {
		return
	}
	items := sfItems(policy)
	pick := -1
	for i, it := range items {
		if bind != "" && it.name == bind {
			pick = i
			break
		}
	}
	if pick < 0 {
		// No item binds by name: the first was taken, and of
		// "minute";q=100;w=60 and "second";q=5;w=1 the order decided
		// between 1.6 and 5 a second.
		pick = tightest(items, period)
	}
	if pick < 0 {
		return
	}
	it := items[pick]
	if it.bare != "" {
		h.set(&h.limit, "ratelimit-policy", firstCount(it.bare)) // draft 7: Q;w=W
	} else {
		h.take(it, "q", "ratelimit-policy", &h.limit, firstCount)
	}
	w := int64(-1)
	h.take(it, "w", "ratelimit-policy", &w, parseSeconds)
	if w > 0 {
		h.window = w
	}
}

// tightest is the index of the policy among items that allows the least
// per period (ns): quota over window, a window missing or unreadable taken
// as period, an item without a readable quota skipped unless none has one
// (then the first, for its reasons to be reported); -1 for no items.
func tightest(items []sfItem, period int64) int {
	best, bestRate := -1, math.Inf(1)
	for i, it := range items {
		qs, ok := it.bare, it.bare != ""
		if !ok {
			qs, ok = it.get("q")
		}
		q := firstCount(qs)
		if !ok || q.why != "" {
			continue
		}
		w := float64(period)
		if ws, ok := it.get("w"); ok {
			if pw := parseSeconds(ws); pw.why == "" && pw.v > 0 {
				w = float64(pw.v)
			}
		}
		if r := float64(q.v) / w; best < 0 || r < bestRate {
			best, bestRate = i, r
		}
	}
	if best < 0 && len(items) > 0 {
		best = 0
	}
	return best
}

// take reads parameter key of it with parse into dst.
func (h *upHeaders) take(it sfItem, key, field string, dst *int64, parse func(string) value) {
	if v, ok := it.get(key); ok {
		h.set(dst, field, parse(v))
	}
}

// sfItem is one member of a structured-field list: a quoted name (or a
// bare token) and its parameters.
type sfItem struct {
	name   string // the quoted string member
	bare   string // a bare (unquoted, not key=value) member
	params [][2]string
}

func (it sfItem) get(k string) (string, bool) {
	for _, p := range it.params {
		if p[0] == k {
			return p[1], true
		}
	}
	return "", false
}

func (it sfItem) has(k string) bool { _, ok := it.get(k); return ok }

// sfItems splits a structured-field list loosely: members by ',', their
// parts by ';'. A draft-7 dictionary (limit=1, remaining=2) becomes one
// member holding every key=value as a parameter. At most 16 members.
func sfItems(v string) []sfItem {
	var out []sfItem
	dict := !strings.Contains(v, ";") && strings.Contains(v, "=")
	var cur sfItem
	for n, m := range strings.Split(v, ",") {
		if n >= 16 {
			break
		}
		if !dict {
			cur = sfItem{}
		}
		for i, part := range strings.Split(m, ";") {
			part = strings.TrimSpace(part)
			if k, val, ok := strings.Cut(part, "="); ok {
				cur.params = append(cur.params, [2]string{strings.ToLower(strings.TrimSpace(k)), strings.Trim(strings.TrimSpace(val), `"`)})
			} else if i == 0 && strings.HasPrefix(part, `"`) {
				cur.name = strings.Trim(part, `"`)
			} else if i == 0 {
				cur.bare = part
			}
		}
		if !dict {
			out = append(out, cur)
		}
	}
	if dict {
		out = append(out, cur)
	}
	return out
}

// parseHTTPDate reads an IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT") as
// Unix ns.
func parseHTTPDate(v string) (int64, bool) {
	f := strings.Fields(v)
	if len(f) != 6 || f[5] != "GMT" {
		return 0, false
	}
	day, err1 := strconv.Atoi(f[1])
	year, err2 := strconv.Atoi(f[3])
	mon := strings.Index("JanFebMarAprMayJunJulAugSepOctNovDec", f[2])
	hms := strings.Split(f[4], ":")
	if err1 != nil || err2 != nil || mon < 0 || mon%3 != 0 || len(f[2]) != 3 || len(hms) != 3 ||
		day < 1 || day > 31 || year < 1970 || year > 9999 {
		return 0, false
	}
	var t [3]int
	for i, s := range hms {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > 60 {
			return 0, false
		}
		t[i] = n
	}
	days := daysFromCivil(int64(year), int64(mon/3+1), int64(day))
	secs := ((days*24+int64(t[0]))*60+int64(t[1]))*60 + int64(t[2])
	if secs > math.MaxInt64/int64(1e9) {
		// Past 2262 in ns: as far ahead as a time can be (the caller caps
		// the pause). Multiplied out, it wrapped: a date in 2326 read as
		// past, one in 2611 as two minutes ahead.
		return math.MaxInt64, true
	}
	return secs * 1e9, true
}

// daysFromCivil is the number of days from 1970-01-01 to y-m-d (proleptic
// Gregorian calendar).
func daysFromCivil(y, m, d int64) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}
