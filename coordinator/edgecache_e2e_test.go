package coordinator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/coordinator/merge"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Real processes: `edgelimit coordinator` and `edgelimit edge` (4
// isolates), for what edges cache of the coordinator's state: resets
// (issue 19, item 4), replies a bad proxy mangled (item 5), and what a
// fail policy admitted during an outage.

// edgeGet asks the edge at addr for one decision and returns its status
// and its EdgeLimit-Fail-Policy header.
func edgeGet(t *testing.T, addr, limiter, key string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/v1/decide?limiter=" + limiter + "&key=" + url.QueryEscape(key))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("EdgeLimit-Fail-Policy")
}

func writeConfig(t *testing.T, cfg string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "limits.json")
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// A key reset on the coordinator (the dashboard's reset button) is
// admitted by every isolate within two sync intervals of the reset, also
// by those that denied it from a dry spell or a full window they cached:
// 5/hour, 4 isolates, 100 ms syncs.
// Over Redis Cluster (the shared mode, whose replies carry no reset
// notices) too: an isolate that heard nothing for two sync intervals
// names the key in a sync before it denies, and the reply's view of the
// key is the reset one.
func TestResetReachesEveryIsolateProcess(t *testing.T) {
	bin := buildBinary(t)
	stores := e2eStores(t)
	for _, store := range stores {
		for _, mode := range []string{"auto", "approximate"} {
			t.Run(strings.SplitN(strings.TrimPrefix(store, "--"), ":", 2)[0]+"/"+mode, func(t *testing.T) { testResetReaches(t, bin, store, mode) })
		}
	}
}

func testResetReaches(t *testing.T, bin, store, mode string) {
	cfg := writeConfig(t, `{"limiters": [{"name": "h", "algorithm": "fixed_window", "limit": 5, "period": "1h", "mode": "`+mode+`"}]}`)
	ca, ea := freeAddr(t), freeAddr(t)
	startProcess(t, bin, store, "--listen", ca, "--config", cfg)
	startEdge(t, bin, ea, "--config", cfg, "--coordinator", "http://"+ca, "--isolates", "4", "--sync", "100ms")
	// Exactness holds for what the isolates decide on a fresh view; on a
	// machine so loaded that an attempt is in flight past a second, the
	// view turns stale and the fail policy (open) decides, as it should
	// (the header says so): those are counted apart.
	admitted, byPolicy := 0, 0
	for i := 0; i < 40; i++ { // requests go round-robin: 10 per isolate
		st, policy := edgeGet(t, ea, "h", "k")
		switch {
		case policy != "":
			byPolicy++
		case st == 200:
			admitted++
		}
		time.Sleep(20 * time.Millisecond)
	}
	if byPolicy > 0 {
		t.Logf("%d of 40 decided by the fail policy (a view stale under load)", byPolicy)
	}
	if admitted > 5 && mode == "auto" || admitted < 5 && byPolicy == 0 {
		t.Fatalf("%d admitted of 40 on a fresh view before the reset, want 5 (%d by the fail policy)", admitted, byPolicy)
	}
	// Every isolate denies before the reset: four 429s in a row (round
	// robin: one per isolate). An approximate isolate may still admit on
	// its estimate for a while: give it a few more requests.
	for run, tries := 0, 0; run < 4; tries++ {
		if tries == 40 {
			t.Fatalf("no four denials in a row before the reset (approximate isolates keep admitting)")
		}
		if st, policy := edgeGet(t, ea, "h", "k"); st == 429 {
			run++
		} else if mode == "auto" && policy == "" {
			t.Fatalf("an auto isolate admits past the limit on a fresh view before the reset (%d)", st)
		} else {
			run = 0
		}
	}
	req, _ := http.NewRequest(http.MethodDelete, "http://"+ca+"/v1/limiters/h/keys/k", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("reset: %d", resp.StatusCode)
	}
	// No request in between: an isolate that heard nothing
	// for two sync intervals syncs before it denies from its
	// cache (wasm/core/resets.go), so the first request each
	// isolate gets two sync intervals after the reset is
	// admitted.
	// Two sync intervals after each isolate last heard from the
	// coordinator (its /healthz last_sync_age_ms): a reply made before
	// the reset and delivered after it (a sync in flight at the reset,
	// late under load) counts as heard, and its isolate may deny from its
	// cache until two intervals after it came.
	time.Sleep(200 * time.Millisecond)
	for deadline := time.Now().Add(5 * time.Second); !everyIsolateQuiet(t, ea, 200); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the isolates keep syncing 5 s after the reset with no request")
		}
	}
	for i := 0; i < 4; i++ {
		if st, _ := edgeGet(t, ea, "h", "k"); st != 200 {
			t.Errorf("request %d (one per isolate) two sync intervals after the reset: %d, want 200", i, st)
		}
	}
}

// everyIsolateQuiet reports whether every isolate of the edge at addr last
// heard from its coordinator at least ms ago (or never).
func everyIsolateQuiet(t *testing.T, addr string, ms int64) bool {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var hl struct {
		Isolates []struct {
			LastSyncAgeMS int64 `json:"last_sync_age_ms"`
		} `json:"isolates"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&hl); err != nil {
		t.Fatal(err)
	}
	for _, is := range hl.Isolates {
		if is.LastSyncAgeMS >= 0 && is.LastSyncAgeMS < ms {
			return false
		}
	}
	return len(hl.Isolates) > 0
}

// mangler is an HTTP proxy between edge and coordinator that can rewrite
// the coordinator's replies as a buggy proxy or coordinator build would.
type mangler struct {
	target string
	mode   atomic.Int32 // one of the mangle* constants
	bad    atomic.Int64 // replies mangled
}

const (
	mangleNone   = iota
	mangleMax    // every view's window and TAT become MaxInt64
	mangleLimit1 // every key gets an upstream view with a limit of 1 for an hour
)

func (m *mangler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	req, _ := http.NewRequest(r.Method, m.target+r.URL.RequestURI(), bytes.NewReader(body))
	req.Header = r.Header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if mode := m.mode.Load(); mode != mangleNone && r.URL.Path == "/v1/sync" && resp.StatusCode == 200 {
		var rp wire.Reply
		if rp.UnmarshalMsg(out) == nil {
			for i := range rp.Entries {
				v := &rp.Entries[i]
				switch mode {
				case mangleMax:
					v.Window, v.TAT = math.MaxInt64, math.MaxInt64
				case mangleLimit1:
					rp.Upstream = append(rp.Upstream, wire.UpView{Limiter: v.Limiter, Key: v.Key, Limit: 1, Life: int64(time.Hour)})
				}
			}
			out = rp.AppendMsg(nil)
			m.bad.Add(1)
		}
	}
	for k, vs := range resp.Header {
		if k != "Content-Length" {
			w.Header()[k] = vs
		}
	}
	w.WriteHeader(resp.StatusCode)
	w.Write(out)
}

// A reply with a window or a TAT of MaxInt64, or a forged limit of 1,
// wedges no key: 2 s after honest replies resume, every isolate admits
// each key again on a fresh view (fail policy closed, so no admission
// comes from the fail policy).
func TestManglingProxyWedgesNoKey(t *testing.T) {
	bin := buildBinary(t)
	cfg := writeConfig(t, `{"limiters": [
		{"name": "w", "algorithm": "fixed_window", "limit": 10, "period": "1s"},
		{"name": "tb", "algorithm": "token_bucket", "limit": 10, "period": "1s"},
		{"name": "ta", "algorithm": "token_bucket", "limit": 10, "period": "1s", "mode": "approximate"}]}`)
	ca, ea := freeAddr(t), freeAddr(t)
	startProcess(t, bin, "--in-memory", "--listen", ca, "--config", cfg)
	m := &mangler{target: "http://" + ca}
	proxy := httptest.NewServer(m)
	defer proxy.Close()
	startEdge(t, bin, ea, "--config", cfg, "--coordinator", proxy.URL, "--isolates", "4", "--sync", "100ms",
		"--fail-policy", "closed")
	lims := []string{"w", "tb", "ta"}
	traffic := func(d time.Duration) {
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			for _, l := range lims {
				edgeGet(t, ea, l, "k")
			}
		}
	}
	for _, mode := range []int32{mangleMax, mangleLimit1} {
		traffic(500 * time.Millisecond)
		m.mode.Store(mode)
		before := m.bad.Load()
		traffic(time.Second)
		if m.bad.Load() == before {
			t.Fatalf("mode %d: no reply mangled", mode)
		}
		m.mode.Store(mangleNone)
		time.Sleep(2 * time.Second)
		for _, l := range lims {
			for i := 0; i < 4; i++ { // one request per isolate
				if st, policy := edgeGet(t, ea, l, "k"); st != 200 || policy != "" {
					t.Errorf("mode %d, limiter %s, request %d, 2 s after honest replies: %d (fail policy %q), want 200 on a fresh view",
						mode, l, i, st, policy)
				}
			}
		}
	}
}

// What the open fail policy admits in the module's place while the
// coordinator is down (lease misses of an auto limiter) is counted by the
// coordinator once it is back: its count is every admission.
func TestOpenAdmissionsCountedAfterOutage(t *testing.T) {
	bin := buildBinary(t)
	cfg := writeConfig(t, `{"limiters": [{"name": "big", "algorithm": "fixed_window", "limit": 1000000000, "period": "1h"}]}`)
	dir, ca, ea := t.TempDir(), freeAddr(t), freeAddr(t)
	args := []string{"--data", dir, "--listen", ca, "--config", cfg}
	coord, _ := startProcess(t, bin, args...)
	edge := startEdge(t, bin, ea, "--config", cfg, "--coordinator", "http://"+ca, "--isolates", "4", "--sync", "50ms",
		"--stale-after", "150ms", "--sync-timeout", "200ms", "--fail-policy", "open")
	w0 := time.Now().Unix() / 3600
	admitted, byPolicy := 0, 0
	send := func(n int) {
		for i := 0; i < n; i++ {
			st, policy := edgeGet(t, ea, "big", "k")
			if st == 200 {
				admitted++
			}
			if policy != "" {
				byPolicy++
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	send(40)
	if err := coord.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	coord.Wait()
	time.Sleep(1500 * time.Millisecond) // the isolates' leases (1 s) run out
	send(100)
	startProcess(t, bin, args...)
	time.Sleep(time.Second)
	send(10)
	// Cost admitted within a lease is reported lazily (it is reserved
	// already): a graceful stop reports it in its last batch.
	if err := edge.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	edge.Wait()
	var ks merge.KeyState
	var err error
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		ks, err = globalCount(ca, "big", "k")
		if err == nil && ks.Count == int64(admitted) || time.Now().After(deadline) {
			break
		}
	}
	if time.Now().Unix()/3600 != w0 {
		t.Skip("the hour changed during the test")
	}
	if byPolicy == 0 {
		t.Fatal("no request was decided by the fail policy")
	}
	if err != nil || ks.Count != int64(admitted) {
		t.Fatalf("coordinator counts %d (%v), want every admission: %d (%d decided by the fail policy)", ks.Count, err, admitted, byPolicy)
	}
	t.Logf("%d admitted, %d of them on a stale view; the coordinator counts %d", admitted, byPolicy, ks.Count)
}

var _ = fmt.Sprint
