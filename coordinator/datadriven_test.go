package coordinator

import (
	"fmt"
	"github.com/cockroachdb/pebble/v2/vfs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/edgelimit/edgelimit/coordinator/merge"
	"github.com/edgelimit/edgelimit/coordinator/pebblestore"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestMergeDataDriven runs the merge scenarios of testdata/merge/ against a
// Merger used directly (no Coordinator goroutine), over Pebble on disk. Each
// file is a sequence of commands (Pebble's datadriven format); after an
// intended change of behaviour, rewrite the expected outputs with
//
//	go test ./coordinator -run TestMergeDataDriven -rewrite
//
// Commands:
//
//	config                      one limiter per line: NAME ALGORITHM LIMIT PERIOD [mode=M] [burst=N] [upstream]
//	apply iso=ID seq=N at=T [now=T]   lines: "delta LIMITER KEY win=W delta=D demand=X" or
//	                            "signal LIMITER KEY [pause=DUR] [failures=N] [successes=N] [limit=N] [probe]";
//	                            prints the reply's views (or the error)
//	commit now=T                group-commits what is staged
//	reopen                      closes the store and opens it again (what a restart recovers)
//	state LIMITER KEY now=T     the admin view of a key
//	gc now=T                    records GC deletes (uncached ones only)
//
// Times are Go durations from the Unix epoch ("1000s", "1000.5s").
func TestMergeDataDriven(t *testing.T) {
	files, err := filepath.Glob("testdata/merge/*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no merge scenarios: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			h := &mergeHarness{dir: t.TempDir()}
			defer h.close()
			datadriven.RunTest(t, f, func(t *testing.T, d *datadriven.TestData) string {
				out, err := h.run(t, d)
				if err != nil {
					return "error: " + err.Error() + "\n"
				}
				return out
			})
		})
	}
}

type mergeHarness struct {
	dir   string
	cfg   wire.Config
	store *pebblestore.Store
	m     *merge.Merger
}

func (h *mergeHarness) close() {
	if h.store != nil {
		h.store.Close()
		h.store = nil
	}
}

func (h *mergeHarness) open() error {
	h.close()
	s, err := pebblestore.Open(vfs.Default, h.dir)
	if err != nil {
		return err
	}
	m, err := merge.NewMerger(h.cfg, s, merge.MergerOptions{})
	if err != nil {
		s.Close()
		return err
	}
	h.store, h.m = s, m
	return nil
}

// at parses a time argument (a Go duration from the epoch) into ns.
func at(t *testing.T, d *datadriven.TestData, name string) (int64, bool, error) {
	a, ok := d.Arg(name)
	if !ok {
		return 0, false, nil
	}
	v, err := time.ParseDuration(a.SingleVal(t))
	return int64(v), true, err
}

func (h *mergeHarness) run(t *testing.T, d *datadriven.TestData) (string, error) {
	switch d.Cmd {
	case "config":
		h.cfg = wire.Config{Version: wire.Version}
		for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
			f := strings.Fields(line)
			if len(f) < 4 {
				return "", fmt.Errorf("want NAME ALGORITHM LIMIT PERIOD, got %q", line)
			}
			limit, err := strconv.ParseInt(f[2], 10, 64)
			if err != nil {
				return "", err
			}
			p, err := time.ParseDuration(f[3])
			if err != nil {
				return "", err
			}
			l := wire.LimiterConfig{Name: f[0], Algorithm: f[1], Limit: limit, Period: int64(p), Mode: wire.Approximate}
			for _, opt := range f[4:] {
				k, v, _ := strings.Cut(opt, "=")
				switch k {
				case "mode":
					l.Mode = v
				case "burst":
					l.Burst, _ = strconv.ParseInt(v, 10, 64)
				case "upstream":
					l.Upstream = &wire.UpstreamConfig{CircuitFailures: 2}
				default:
					return "", fmt.Errorf("unknown option %q", opt)
				}
			}
			h.cfg.Limiters = append(h.cfg.Limiters, l)
		}
		return "", h.open()
	case "apply":
		var iso string
		var seq int64
		d.ScanArgs(t, "iso", &iso)
		d.ScanArgs(t, "seq", &seq)
		bat, _, err := at(t, d, "at")
		if err != nil {
			return "", err
		}
		now, ok, err := at(t, d, "now")
		if err != nil {
			return "", err
		}
		if !ok {
			now = bat
		}
		b := &wire.Batch{Version: wire.Version, Isolate: iso, Seq: seq, At: bat}
		for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
			f := strings.Fields(line)
			if len(f) == 0 {
				continue
			}
			if len(f) < 3 {
				return "", fmt.Errorf("bad line %q", line)
			}
			kv := map[string]string{}
			flags := map[string]bool{}
			for _, x := range f[3:] {
				if k, v, ok := strings.Cut(x, "="); ok {
					kv[k] = v
				} else {
					flags[x] = true
				}
			}
			num := func(k string) int64 { n, _ := strconv.ParseInt(kv[k], 10, 64); return n }
			switch f[0] {
			case "delta":
				b.Entries = append(b.Entries, wire.Delta{Limiter: f[1], Key: f[2], Window: num("win"), Delta: num("delta"), Demand: num("demand")})
			case "signal":
				s := wire.Signal{Limiter: f[1], Key: f[2], Failures: num("failures"), Successes: num("successes"), Limit: num("limit"), Probe: flags["probe"]}
				if p, ok := kv["pause"]; ok {
					v, err := time.ParseDuration(p)
					if err != nil {
						return "", err
					}
					s.Pause = int64(v)
				}
				b.Signals = append(b.Signals, s)
			default:
				return "", fmt.Errorf("unknown line %q", line)
			}
		}
		rp, err := h.m.Apply(b, now)
		if err != nil {
			return "", err
		}
		var sb strings.Builder
		for _, v := range rp.Entries {
			fmt.Fprintf(&sb, "view %s/%s win=%d count=%d prev=%d tat=%d lease=%d isolates=%d stand=%d exhausted=%t\n",
				v.Limiter, v.Key, v.Window, v.Count, v.Prev, v.TAT, v.Lease, v.Isolates, v.Stand, v.Exhausted)
		}
		for _, u := range rp.Upstream {
			fmt.Fprintf(&sb, "upstream %s/%s pause=%v circuit=%d open=%v probe=%t limit=%d\n",
				u.Limiter, u.Key, time.Duration(u.Pause), u.Circuit, time.Duration(u.Open), u.Probe, u.Limit)
		}
		return sb.String(), nil
	case "commit":
		now, _, err := at(t, d, "now")
		if err != nil {
			return "", err
		}
		return "ok\n", h.m.Commit(now)
	case "reopen":
		return "ok\n", h.open()
	case "state":
		if len(d.CmdArgs) < 3 {
			return "", fmt.Errorf("state LIMITER KEY now=T")
		}
		now, _, err := at(t, d, "now")
		if err != nil {
			return "", err
		}
		ks, err := h.m.KeyState(d.CmdArgs[0].Key, d.CmdArgs[1].Key, now)
		if err != nil {
			return "", err
		}
		s := fmt.Sprintf("limit=%d window=%d count=%d prev=%d tat=%d isolates=%d lease_sum=%d", ks.Limit, ks.Window, ks.Count, ks.Prev, ks.TAT, ks.Isolates, ks.LeaseSum)
		if u := ks.Upstream; u != nil {
			s += fmt.Sprintf(" upstream: paused=%v circuit=%s failures=%d announced=%d", time.Duration(u.PausedNS), u.Circuit, u.Failures, u.Announced)
		}
		return s + "\n", nil
	case "gc":
		now, _, err := at(t, d, "now")
		if err != nil {
			return "", err
		}
		n, err := h.m.GC(now, 1<<20)
		return fmt.Sprintf("deleted %d\n", n), err
	}
	return "", fmt.Errorf("unknown command %q", d.Cmd)
}
