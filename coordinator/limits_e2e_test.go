package coordinator

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Real processes: an edge host whose --config says 60 per second, a
// coordinator whose says 6. The coordinator counts and leases by its 6;
// the edge answers with it (limit, remaining) once it heard, and decides
// by it, and its log says so once.
func TestEdgeUsesCoordinatorsLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end with processes; not in -short")
	}
	bin := buildBinary(t)
	for _, mode := range []string{"auto", "approximate"} {
		t.Run(mode, func(t *testing.T) {
			lim := func(n string) string {
				return writeConfig(t, `{"limiters": [{"name": "l", "algorithm": "fixed_window", "limit": `+n+`, "period": "1h", "mode": "`+mode+`"}]}`)
			}
			ca, ea := freeAddr(t), freeAddr(t)
			startProcess(t, bin, "--in-memory", "--listen", ca, "--config", lim("6"))
			logs := startEdgeProcess(t, bin, "--listen", ea, "--config", lim("60"), "--coordinator", "http://"+ca, "--isolates", "2", "--sync", "100ms")
			type answer struct {
				Allowed   bool  `json:"allowed"`
				Limit     int64 `json:"limit"`
				Remaining int64 `json:"remaining"`
			}
			var last answer
			admitted := 0
			for i := 0; i < 30; i++ {
				resp, err := http.Get("http://" + ea + "/v1/decide?limiter=l&key=k")
				if err != nil {
					t.Fatal(err)
				}
				last = answer{}
				json.NewDecoder(resp.Body).Decode(&last)
				resp.Body.Close()
				if last.Allowed {
					admitted++
				}
				if h := resp.Header.Get("RateLimit-Limit"); i > 10 && h != "" && h != "6" {
					t.Errorf("request %d: RateLimit-Limit %q, want the coordinator's 6", i, h)
				}
				time.Sleep(30 * time.Millisecond)
			}
			if last.Limit != 6 || last.Remaining != 0 {
				t.Errorf("after 30 requests: limit %d remaining %d, want the coordinator's 6 and 0", last.Limit, last.Remaining)
			}
			if admitted > 6 && mode == "auto" || admitted > 8 {
				t.Errorf("%d admitted against the coordinator's limit of 6", admitted)
			}
			const said = "the coordinator's limits differ from this edge's configuration"
			if n := strings.Count(logs.String(), said); n != 1 {
				t.Errorf("the edge's log says %q %d times, want once:\n%s", said, n, logs)
			}
		})
	}
}
