package coordinator

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/coordinator/merge"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestDiskReserveKeepsTheCoordinatorUp fills the real disk under a
// coordinator process (a 48 MiB tmpfs) while an isolate syncs. Without the
// reserve, the first commit that found the disk full ended the process
// (Pebble's fatal commit error) and a restart on the full disk hung for as
// long as it stayed full, deaf to SIGTERM. With it: syncs and /healthz
// answer 503 while less than the reserve is free, the batch refused is
// applied once when it is retried after space is freed, and a start on a
// full disk fails at once, naming the reserve.
func TestDiskReserveKeepsTheCoordinatorUp(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	mnt := filepath.Join(t.TempDir(), "fs")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("mounting a tmpfs needs root: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", mnt).Run() })
	bin, cfg, addr := buildBinary(t), writeE2EConfig(t), freeAddr(t)
	data := filepath.Join(mnt, "data")
	args := []string{"--data", data, "--listen", addr, "--config", cfg, "--disk-reserve", "12MiB"}
	cmd, logs := startProcess(t, bin, args...)
	url := "http://" + addr
	w0 := time.Now().UnixNano() / int64(720*time.Hour)
	at := map[int64]int64{} // a retry resends the same batch
	post := func(seq, delta int64) (int, string) {
		if at[seq] == 0 {
			at[seq] = time.Now().UnixNano()
		}
		b := &wire.Batch{Version: wire.Version, Isolate: "iso", Seq: seq, At: at[seq],
			Entries: []wire.Delta{{Limiter: "c", Key: "k", Window: w0, Delta: delta}}}
		resp, err := http.Post(url+"/v1/sync", MsgpackContentType, bytes.NewReader(b.AppendMsg(nil)))
		if err != nil {
			t.Fatalf("sync %d: %v (the process: %v)\n%s", seq, err, cmd.ProcessState, logs)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(body)
	}
	healthz := func() int {
		resp, err := http.Get(url + "/healthz")
		if err != nil {
			t.Fatalf("healthz: %v\n%s", err, logs)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if st, body := post(1, 5); st != 200 {
		t.Fatalf("first sync: %d %s", st, body)
	}

	// Fill the disk to 4 MiB free.
	fill := filepath.Join(mnt, "fill")
	f, err := os.Create(fill)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	for {
		var st syscall.Statfs_t
		if err := syscall.Statfs(mnt, &st); err != nil {
			t.Fatal(err)
		}
		if int64(st.Bavail)*int64(st.Bsize) <= 4<<20 {
			break
		}
		if _, err := f.Write(chunk); err != nil {
			t.Fatalf("filling the disk: %v", err)
		}
	}
	f.Close()
	time.Sleep(150 * time.Millisecond) // past one reading of the free space
	for i := 0; i < 20; i++ {
		st, body := post(2, 7)
		if st != 503 || !strings.Contains(body, "reserve") {
			t.Fatalf("sync %d on a full disk: %d %s\n%s", i, st, body, logs)
		}
	}
	if st := healthz(); st != 503 {
		t.Fatalf("healthz on a full disk: %d", st)
	}
	if !strings.Contains(logs.String(), "below the reserve") {
		t.Fatalf("no log line:\n%s", logs)
	}

	// Space comes back: /healthz says so before any batch (it said 503
	// until a commit succeeded, which a load balancer that routes by it
	// never sent), and the refused batch, retried, counts once.
	if err := os.Remove(fill); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); healthz() != 200; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("healthz still 503 5 s after space came back, no batch sent\n%s", logs)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, body := post(2, 7)
		if st == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after space came back: %d %s\n%s", st, body, logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st, body := post(2, 7); st != 200 {
		t.Fatalf("retry: %d %s", st, body)
	}
	resp, err := http.Get(url + "/v1/limiters/c/keys/k")
	if err != nil {
		t.Fatal(err)
	}
	var ks merge.KeyState
	err = json.NewDecoder(resp.Body).Decode(&ks)
	resp.Body.Close()
	if err != nil || ks.Count != 12 {
		t.Fatalf("count after recovery: %+v %v, want 12", ks, err)
	}
	if st := healthz(); st != 200 {
		t.Fatalf("healthz after recovery: %d", st)
	}

	// A start on a full disk fails at once and says why.
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
	f, err = os.Create(fill)
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := f.Write(chunk); err != nil {
			break // ENOSPC: full
		}
	}
	f.Close()
	start := time.Now()
	out, err := exec.Command(bin, append([]string{"coordinator"}, args...)...).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || !strings.Contains(string(out), "reserve") {
		t.Fatalf("start on a full disk: %v\n%s", err, out)
	}
	t.Logf("a start on a full disk failed after %s: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(string(out)))

}
