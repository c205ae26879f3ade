package coordinator

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/coordinator/merge"
	"github.com/edgelimit/edgelimit/internal/rediscluster"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// These tests build the real binary (go build ./cmd/edgelimit) and run
// `edgelimit coordinator` as a process.

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

func buildBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "edgelimit-e2e-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "edgelimit")
		out, err := exec.Command("go", "build", "-o", binPath, "../cmd/edgelimit").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	stopTestCluster()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// syncBuffer is a goroutine-safe stderr sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startProcess runs the coordinator and waits until /healthz answers.
func startProcess(t *testing.T, bin string, args ...string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"coordinator"}, args...)...)
	stderr := &syncBuffer{}
	cmd.Stderr, cmd.Stdout = stderr, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var addr string
	for i, a := range args {
		if a == "--listen" {
			addr = args[i+1]
		}
	}
	if err := waitHealthy(addr, 15*time.Second); err != nil {
		t.Fatalf("coordinator did not become ready: %v; stderr:\n%s", err, stderr)
	}
	return cmd, stderr
}

// waitHealthy waits until http://addr/healthz answers 200, at most within.
func waitHealthy(addr string, within time.Duration) error {
	for deadline := time.Now().Add(within); ; time.Sleep(10 * time.Millisecond) {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: /healthz not 200 within %v", addr, within)
		}
	}
}

// startEdgeProcess starts `bin edge args...` (args must hold --listen),
// stops it at the test's end, and returns once its /healthz answers; its
// stdout and stderr go to the returned buffer.
func startEdgeProcess(t *testing.T, bin string, args ...string) *syncBuffer {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"edge"}, args...)...)
	logs := &syncBuffer{}
	cmd.Stderr, cmd.Stdout = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var addr string
	for i, a := range args {
		if a == "--listen" && i+1 < len(args) {
			addr = args[i+1]
		}
	}
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
			resp.Body.Close()
			return logs
		}
		if time.Now().After(deadline) {
			t.Fatalf("edge did not start:\n%s", logs)
		}
	}
}

// e2eStores returns the coordinator's store flags an end-to-end test runs
// with: in memory, and a Redis Cluster of 3 masters (started here, stopped
// at the test's end) where redis-server is installed (else logged as
// skipped).
func e2eStores(t *testing.T) []string {
	t.Helper()
	stores := []string{"--in-memory"}
	if err := rediscluster.Available(); err != nil {
		t.Logf("SKIPPED over Redis Cluster: %v", err)
		return stores
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := rediscluster.Start(ctx, rediscluster.Options{Masters: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Stop)
	return append(stores, "--store=redis://"+strings.Join(cl.Addrs(), ","))
}

const e2ePeriod = int64(720 * time.Hour)

func writeE2EConfig(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.json")
	cfg := `{"limiters": [{"name": "c", "algorithm": "fixed_window", "limit": 1000000000000, "period": "720h"}]}`
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// e2eClients are isolates that post batches in a loop and retry each batch
// with the same Seq until it is acknowledged; expected sums the deltas of
// acknowledged batches.
type e2eClients struct {
	mu       sync.Mutex
	expected map[string]int64
	acked    int
	errs     []string
}

func (cs *e2eClients) run(url string, n int, w0 int64, stop <-chan struct{}) *sync.WaitGroup {
	cs.expected = map[string]int64{}
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			hc := &http.Client{Timeout: 3 * time.Second}
			for seq := int64(1); ; seq++ {
				select {
				case <-stop:
					return
				default:
				}
				b := batch(fmt.Sprintf("client-%d", i), seq, time.Now().UnixNano())
				sums := map[string]int64{}
				for j := 0; j < 20; j++ {
					k := fmt.Sprintf("k%d", rng.IntN(10))
					d := 1 + rng.Int64N(9)
					b.Entries = append(b.Entries, wire.Delta{Limiter: "c", Key: k, Window: w0, Delta: d, Demand: d})
					sums[k] += d
				}
				body := b.AppendMsg(nil)
				for attempt := 0; ; attempt++ { // retry with the same Seq until acknowledged
					resp, err := hc.Post(url+"/v1/sync", MsgpackContentType, bytes.NewReader(body))
					if err == nil {
						out, _ := io.ReadAll(resp.Body)
						resp.Body.Close()
						var rp wire.Reply
						if resp.StatusCode == 200 && rp.UnmarshalMsg(out) == nil && rp.Seq == seq {
							break
						}
						if resp.StatusCode != 200 && resp.StatusCode != 503 {
							cs.mu.Lock()
							cs.errs = append(cs.errs, fmt.Sprintf("status %d: %s", resp.StatusCode, out))
							cs.mu.Unlock()
							return
						}
					}
					if attempt > 1000 {
						cs.mu.Lock()
						cs.errs = append(cs.errs, "gave up: "+fmt.Sprint(err))
						cs.mu.Unlock()
						return
					}
					time.Sleep(10 * time.Millisecond)
				}
				cs.mu.Lock()
				for k, d := range sums {
					cs.expected[k] += d
				}
				cs.acked++
				cs.mu.Unlock()
			}
		}(i)
	}
	return &wg
}

func (cs *e2eClients) ackedNow() int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.acked
}

// checkCounts compares the coordinator's counts with what the clients got
// acknowledged: every acknowledged delta exactly once.
func (cs *e2eClients) checkCounts(t *testing.T, url string, w0 int64) {
	t.Helper()
	if len(cs.errs) > 0 {
		t.Fatalf("client errors: %v", cs.errs)
	}
	for i := 0; i < 10; i++ {
		k := fmt.Sprintf("k%d", i)
		resp, err := http.Get(url + "/v1/limiters/c/keys/" + k)
		if err != nil {
			t.Fatal(err)
		}
		var ks merge.KeyState
		err = json.NewDecoder(resp.Body).Decode(&ks)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		got := ks.Count
		if ks.Window == w0+1 {
			got = ks.Prev
		}
		if got != cs.expected[k] {
			t.Errorf("key %s: coordinator counts %d, clients had %d acknowledged", k, got, cs.expected[k])
		}
	}
}

// TestKill9ExactlyOnce: several clients post batches under load; the
// coordinator process is SIGKILLed twice and restarted on the same
// directory; clients retry unacknowledged batches with the same Seq. Every
// acknowledged delta must be counted exactly once. Checkpoints run every few
// keys and milliseconds, so the kills land with a log to replay and, likely,
// a checkpoint half written.
func TestKill9ExactlyOnce(t *testing.T) {
	bin := buildBinary(t)
	dir, cfg, addr := t.TempDir(), writeE2EConfig(t), freeAddr(t)
	args := []string{"--data", dir, "--listen", addr, "--config", cfg,
		"--checkpoint-keys", "8", "--checkpoint-interval", "20ms"}
	url := "http://" + addr
	w0 := time.Now().UnixNano() / e2ePeriod
	cmd, _ := startProcess(t, bin, args...)
	var cs e2eClients
	stop := make(chan struct{})
	wg := cs.run(url, 8, w0, stop)
	for round := 0; round < 2; round++ {
		before := cs.ackedNow()
		time.Sleep(600 * time.Millisecond)
		if cs.ackedNow() == before {
			t.Fatalf("round %d: no batch acknowledged under load", round)
		}
		if n := scrapeMetric(t, url, "edgelimit_coordinator_checkpoints_total"); n < 2 {
			t.Fatalf("round %d: %v checkpoints before the kill, want several", round, n)
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		cmd, _ = startProcess(t, bin, args...)
	}
	time.Sleep(400 * time.Millisecond)
	close(stop)
	wg.Wait()
	t.Logf("%d batches acknowledged across 2 kill -9", cs.acked)
	cs.checkCounts(t, url, w0)
}

// TestSIGTERMGracefulShutdown: SIGTERM under load stops the process
// cleanly (exit 0, Pebble closed); after a restart on the same directory
// every acknowledged delta is there exactly once.
func TestSIGTERMGracefulShutdown(t *testing.T) {
	bin := buildBinary(t)
	dir, cfg, addr := t.TempDir(), writeE2EConfig(t), freeAddr(t)
	args := []string{"--data", dir, "--listen", addr, "--config", cfg}
	url := "http://" + addr
	w0 := time.Now().UnixNano() / e2ePeriod
	cmd, stderr := startProcess(t, bin, args...)
	var cs e2eClients
	stop := make(chan struct{})
	wg := cs.run(url, 4, w0, stop)
	time.Sleep(400 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, stderr)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no exit 10s after SIGTERM\n%s", stderr)
	}
	if !strings.Contains(stderr.String(), "shut down cleanly") {
		t.Fatalf("stderr:\n%s", stderr)
	}
	startProcess(t, bin, args...)
	time.Sleep(200 * time.Millisecond)
	close(stop)
	wg.Wait()
	cs.checkCounts(t, url, w0)
}

// scrapeMetric returns the value of the Prometheus series name at url.
func scrapeMetric(t *testing.T, url, name string) float64 {
	t.Helper()
	return metricValue(t, metricsText(t, url), name)
}
