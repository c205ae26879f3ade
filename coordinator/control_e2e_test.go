package coordinator

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// edgeAnswer is the edge host's JSON answer to GET /v1/decide.
type edgeAnswer struct {
	Allowed bool  `json:"allowed"`
	Limit   int64 `json:"limit"`
}

func edgeDecide(t *testing.T, addr string) edgeAnswer {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/v1/decide?limiter=l&key=k")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a edgeAnswer
	json.NewDecoder(resp.Body).Decode(&a)
	return a
}

// untilEdge asks the edge every 10 ms until ok holds for 4 answers in a
// row (both isolates: requests alternate between them), for at most 15 s;
// it returns how long that took from since.
func untilEdge(t *testing.T, addr, what string, since time.Time, ok func(edgeAnswer) bool) time.Duration {
	t.Helper()
	row := 0
	var first time.Time
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if a := edgeDecide(t, addr); ok(a) {
			if row == 0 {
				first = time.Now()
			}
			if row++; row == 4 {
				return first.Sub(since)
			}
		} else {
			row = 0
		}
	}
	t.Fatalf("the edge never answered %s", what)
	return 0
}

// Real processes: a coordinator whose --config says 6 per hour, an edge
// host with 2 isolates syncing every 100 ms. A new limit in the file and a
// SIGHUP reach the edge's answers; a file that does not load is refused
// with a log line and the limit stays; a limit set and a fleet pause and
// resume through the API reach them too. The time from each change to
// the edge's answers is logged. On Pebble (in memory) and on a Redis
// Cluster (no reset notices: a resume waits for the 10 s of pause told).
func TestControlReachesEdgesProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end with processes; not in -short")
	}
	bin := buildBinary(t)
	stores := e2eStores(t)
	for _, store := range stores {
		t.Run(strings.SplitN(strings.TrimPrefix(store, "--"), ":", 2)[0], func(t *testing.T) { testControlReaches(t, bin, store) })
	}
}

func testControlReaches(t *testing.T, bin, store string) {
	conf := func(limit string) string {
		return `{"limiters": [{"name": "l", "algorithm": "fixed_window", "limit": ` + limit + `, "period": "1h", "mode": "approximate"}]}`
	}
	path := writeConfig(t, conf("6"))
	ca, ea := freeAddr(t), freeAddr(t)
	coord, clog := startProcess(t, bin, store, "--listen", ca, "--config", path, "--log-format", "json")
	startEdgeProcess(t, bin, "--listen", ea, "--config", writeConfig(t, conf("6")), "--coordinator", "http://"+ca, "--isolates", "2", "--sync", "100ms")
	untilEdge(t, ea, "denials at 6", time.Now(), func(a edgeAnswer) bool { return !a.Allowed && a.Limit == 6 })

	// A new limit in the file, and SIGHUP.
	if err := os.WriteFile(path, []byte(conf("10")), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := coord.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	took := untilEdge(t, ea, "limit 10 after SIGHUP", start, func(a edgeAnswer) bool { return a.Limit == 10 })
	t.Logf("SIGHUP with limit 10: the edge answers with it after %v", took)
	for _, want := range []string{`coordinator: audit: limit of limiter \"l\": 6 -> 10`, `"by":"config file ` + path, `coordinator: SIGHUP: ` + path + ` reloaded`} {
		if !strings.Contains(clog.String(), want) {
			t.Errorf("the coordinator's log lacks %s:\n%s", want, clog)
		}
	}

	// A file that does not load: refused, logged, 10 stays.
	if err := os.WriteFile(path, []byte(`{"limiters": [`), 0o600); err != nil {
		t.Fatal(err)
	}
	coord.Process.Signal(syscall.SIGHUP)
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(clog.String(), "refused, the configuration in force stays"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no log line for the bad file:\n%s", clog)
		}
	}
	if a := edgeDecide(t, ea); a.Limit != 10 {
		t.Fatalf("after a bad file the edge answers limit %d, want 10", a.Limit)
	}

	// Through the API: a limit, then a fleet pause and its resume.
	put := func(method, p, body string) {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+ca+p, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s %s: %d", method, p, resp.StatusCode)
		}
	}
	start = time.Now()
	put("PUT", "/v1/limiters/l/limit", `{"limit": 1000, "reason": "test"}`)
	took = untilEdge(t, ea, "admitting at limit 1000", start, func(a edgeAnswer) bool { return a.Allowed && a.Limit == 1000 })
	t.Logf("PUT limit 1000: the edge admits under it after %v", took)
	start = time.Now()
	put("POST", "/v1/limiters/l/pause", `{"for": "10m", "reason": "kill switch test"}`)
	took = untilEdge(t, ea, "denials while paused", start, func(a edgeAnswer) bool { return !a.Allowed })
	t.Logf("POST pause: the edge denies after %v", took)
	start = time.Now()
	put("DELETE", "/v1/limiters/l/pause", "")
	took = untilEdge(t, ea, "admissions after the resume", start, func(a edgeAnswer) bool { return a.Allowed })
	t.Logf("DELETE pause: the edge admits again after %v", took)
}
