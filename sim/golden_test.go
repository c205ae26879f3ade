package sim

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the golden outputs in testdata/golden/")

// The table of a shipped scenario is byte for byte what it was: a change
// to the simulator or the module that moves any figure shows here. After
// an intended change, rewrite it with
//
//	go test ./sim -run TestGoldenTable -rewrite
//
// and say in the commit why the figures moved.
func TestGoldenTable(t *testing.T) {
	for _, name := range []string{"llm-6rps", "crm-trace"} {
		t.Run(name, func(t *testing.T) {
			sc, err := Builtin(name)
			if err != nil {
				t.Fatal(err)
			}
			sc.Duration = Duration(20 * time.Second)
			rs, err := testSim(t).Sweep(context.Background(), sc, SweepOptions{
				Intervals: []time.Duration{100 * time.Millisecond, time.Second}, Seed: 7, Parallel: 2})
			if err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			if err := WriteTable(&got, rs); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", "golden", name+".txt")
			if *rewrite {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -rewrite to create it)", err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Errorf("the %s table changed (run with -rewrite if intended):\ngot\n%s\nwant\n%s", name, got.Bytes(), want)
			}
		})
	}
}
