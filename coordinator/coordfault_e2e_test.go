package coordinator

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/edge/syncloop"
)

// Real processes: `edgelimit coordinator` on Pebble on disk and two
// `edgelimit edge` hosts serving under load while the coordinator is
// killed (SIGKILL) and restarted on the same directory, and then hung
// (SIGSTOP) and resumed (SIGCONT).

// loadAnswer is one decision an edge process answered.
type loadAnswer struct {
	at      time.Time // when the answer arrived
	edge    int
	allowed bool
	window  int64  // the window the decision was in (its reset, in periods, less one)
	policy  string // EdgeLimit-Fail-Policy: the fail policy decided it
}

// edgeLoad sends decisions of (limiter, key) to each edge in addrs, one
// goroutine per edge and limiter, gap apart, until stop closes, and
// records every answer.
type edgeLoad struct {
	mu      sync.Mutex
	answers map[string][]loadAnswer // per limiter
	errs    []error
}

func (l *edgeLoad) run(addrs []string, limiters []string, period time.Duration, gap time.Duration, stop <-chan struct{}) *sync.WaitGroup {
	l.answers = map[string][]loadAnswer{}
	var wg sync.WaitGroup
	hc := &http.Client{Timeout: 5 * time.Second}
	for e, addr := range addrs {
		for _, lim := range limiters {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					case <-time.After(gap):
					}
					resp, err := hc.Get("http://" + addr + "/v1/decide?limiter=" + lim + "&key=k")
					if err != nil {
						l.mu.Lock()
						l.errs = append(l.errs, err)
						l.mu.Unlock()
						continue
					}
					var d struct {
						Allowed bool  `json:"allowed"`
						Reset   int64 `json:"reset_ns"`
					}
					err = json.NewDecoder(resp.Body).Decode(&d)
					resp.Body.Close()
					a := loadAnswer{at: time.Now(), edge: e, allowed: d.Allowed, policy: resp.Header.Get("EdgeLimit-Fail-Policy"),
						window: d.Reset/int64(period) - 1}
					l.mu.Lock()
					if err != nil {
						l.errs = append(l.errs, fmt.Errorf("%s: status %d: %w", lim, resp.StatusCode, err))
					} else {
						l.answers[lim] = append(l.answers[lim], a)
					}
					l.mu.Unlock()
				}
			}()
		}
	}
	return &wg
}

// perWindow counts what lim admitted in each window.
func (l *edgeLoad) perWindow(lim string) map[int64]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := map[int64]int{}
	for _, a := range l.answers[lim] {
		if a.allowed {
			n[a.window]++
		}
	}
	return n
}

// admitted counts what lim admitted in all.
func (l *edgeLoad) admitted(lim string) int64 {
	var n int64
	for _, c := range l.perWindow(lim) {
		n += int64(c)
	}
	return n
}

// firstAdmitted returns, per edge, how long after from lim's first fresh
// admission (no fail policy) came; -1 for an edge without one.
func (l *edgeLoad) firstAdmitted(lim string, edges int, from time.Time) []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]time.Duration, edges)
	for i := range out {
		out[i] = -1
	}
	for _, a := range l.answers[lim] {
		if a.allowed && a.policy == "" && a.at.After(from) && out[a.edge] < 0 {
			out[a.edge] = a.at.Sub(from)
		}
	}
	return out
}

// between returns lim's answers that arrived in [from, to).
func (l *edgeLoad) between(lim string, from, to time.Time) []loadAnswer {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []loadAnswer
	for _, a := range l.answers[lim] {
		if !a.at.Before(from) && a.at.Before(to) {
			out = append(out, a)
		}
	}
	return out
}

// TestCoordinatorKilledThenHung: two edge processes of 2 isolates (100 ms
// syncs, default stale bound and probe interval) serve five limiters at
// about 3x the 20/s keys' limit while the coordinator (Pebble on disk) is
// SIGKILLed, restarted on the same directory a second later, and then
// SIGSTOPped for 5 s and SIGCONTed. The strict and auto keys of 20/s
// (fail policy closed) never admit more than 20 in a window, and a strict
// one failing open none from the window after each return on; while the
// coordinator hangs, closed denies and open (named, and the default)
// admits; both edges admit fresh again within 1.5 s of each return; and
// the coordinator's counts of the hourly keys are, once the edges stop,
// what the edges admitted.
func TestCoordinatorKilledThenHung(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end with processes; not in -short")
	}
	bin := buildBinary(t)
	cfg := writeConfig(t, `{"limiters": [
		{"name": "s", "algorithm": "fixed_window", "limit": 20, "period": "1s", "mode": "strict", "fail_policy": "closed"},
		{"name": "a", "algorithm": "fixed_window", "limit": 20, "period": "1s", "mode": "auto", "fail_policy": "closed"},
		{"name": "o", "algorithm": "fixed_window", "limit": 1000000000, "period": "1h", "mode": "auto", "fail_policy": "open"},
		{"name": "h", "algorithm": "fixed_window", "limit": 1000000000, "period": "1h", "mode": "strict"},
		{"name": "so", "algorithm": "fixed_window", "limit": 20, "period": "1s", "mode": "strict", "fail_policy": "open"}]}`)
	dir, ca := t.TempDir(), freeAddr(t)
	args := []string{"--data", dir, "--listen", ca, "--config", cfg}
	coord, _ := startProcess(t, bin, args...)
	var edges []string
	var edgeCmds []*exec.Cmd
	for range 2 {
		ea := freeAddr(t)
		edgeCmds = append(edgeCmds, startEdge(t, bin, ea, "--config", cfg, "--coordinator", "http://"+ca, "--isolates", "2", "--sync", "100ms"))
		edges = append(edges, ea)
	}
	var load edgeLoad
	stop := make(chan struct{})
	wg := load.run(edges, []string{"s", "a", "o", "h", "so"}, time.Second, 30*time.Millisecond, stop)
	var once sync.Once
	end := func() { once.Do(func() { close(stop); wg.Wait() }) }
	defer end()

	time.Sleep(2 * time.Second)
	if err := coord.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	coord.Wait()
	time.Sleep(time.Second)
	coord, logs := startProcess(t, bin, args...)
	restarted := time.Now()
	time.Sleep(3 * time.Second)

	if err := coord.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	hung := time.Now()
	time.Sleep(5 * time.Second)
	if err := coord.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	time.Sleep(3 * time.Second)
	end()

	for _, lim := range []string{"s", "a"} {
		pw := load.perWindow(lim)
		ws := make([]int64, 0, len(pw))
		for w := range pw {
			ws = append(ws, w)
		}
		sort.Slice(ws, func(i, j int) bool { return ws[i] < ws[j] })
		line := ""
		for _, w := range ws {
			line += fmt.Sprintf(" %d", pw[w])
			if pw[w] > 20 {
				t.Errorf("%s: window %d admitted %d, over its limit of 20", lim, w, pw[w])
			}
		}
		t.Logf("%s (20/s, closed): admitted per window:%s", lim, line)
		for _, c := range []struct {
			what string
			at   time.Time
		}{{"restart", restarted}, {"SIGCONT", resumed}} {
			first := load.firstAdmitted(lim, len(edges), c.at)
			t.Logf("%s: first fresh admission per edge after the %s: %v", lim, c.what, first)
			for e, d := range first {
				if d < 0 || d > 1500*time.Millisecond {
					t.Errorf("%s: edge %d admitted fresh %v after the coordinator's %s, want within 1.5 s (-1: never)", lim, e, d, c.what)
				}
			}
		}
	}
	// A strict key failing open overruns while the coordinator is away
	// (each isolate alone: as documented); from the window after each
	// return on, it holds its limit again.
	back := func(w int64) bool {
		start := time.Unix(w, 0)
		return !start.Before(restarted.Add(time.Second)) && !start.Add(time.Second).After(hung) ||
			!start.Before(resumed.Add(time.Second))
	}
	soLine, soOver := "", 0
	for w, n := range load.perWindow("so") {
		if back(w) {
			soLine += fmt.Sprintf(" %d", n)
			if n > 20 {
				soOver++
				t.Errorf("so (20/s, strict, open): window %d, after the coordinator was back, admitted %d, over its limit", w, n)
			}
		}
	}
	t.Logf("so (20/s, strict, open): admitted per window from the one after each return on:%s", soLine)
	// While it hangs (past syncloop.SlowAttempt, 1 s: an attempt in flight
	// that long counts as failing, and a sync interval): open (o, and h by
	// the default policy) admits everything, closed nothing.
	for _, lim := range []string{"o", "h", "s", "a"} {
		as := load.between(lim, hung.Add(syncloop.SlowAttempt+500*time.Millisecond), resumed)
		admitted := 0
		for _, a := range as {
			if a.allowed {
				admitted++
			}
		}
		t.Logf("%s while hung: %d of %d admitted", lim, admitted, len(as))
		switch {
		case len(as) == 0:
			t.Errorf("%s: no answers while the coordinator hung", lim)
		case (lim == "o" || lim == "h") && admitted != len(as):
			t.Errorf("%s (open): %d of %d admitted while the coordinator hung, want all", lim, admitted, len(as))
		case lim != "o" && lim != "h" && admitted != 0:
			t.Errorf("%s (closed): %d of %d admitted while the coordinator hung, want none", lim, admitted, len(as))
		}
	}
	// Nothing admitted is lost: once the edges stop (SIGTERM: their last
	// batches report what their leases covered and was not reported yet),
	// the coordinator counts what they admitted of the hourly keys, once.
	for _, cmd := range edgeCmds {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}
	for _, lim := range []string{"h", "o"} {
		want := load.admitted(lim)
		ks, err := globalCount(ca, lim, "k")
		if err != nil {
			t.Fatal(err)
		}
		if ks.Count != want {
			t.Errorf("%s: the coordinator counts %d, the edges admitted %d\n%s", lim, ks.Count, want, logs)
		}
		t.Logf("%s: %d admitted, %d counted", lim, want, ks.Count)
	}
	t.Logf("%d request errors", len(load.errs))
}
