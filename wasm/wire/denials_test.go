package wire_test

import (
	"strings"
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// A batch that carries "dn", even empty, counts its denials from it; one
// without (an older module) from what each entry asked and did not admit.
func TestEachDenial(t *testing.T) {
	collect := func(b *wire.Batch) map[string]int64 {
		got := map[string]int64{}
		b.EachDenial(func(limiter, key string, _, cost int64) { got[limiter+"/"+key] += cost })
		return got
	}
	entries := []wire.Delta{{Limiter: "s", Key: "k", Window: 7, Delta: 1, Demand: 3}, {Limiter: "s", Key: "j", Window: 7, Delta: 2, Demand: 2}}
	for _, c := range []struct {
		name    string
		denials []wire.Denial
		want    map[string]int64
	}{
		{"older module", nil, map[string]int64{"s/k": 2}},
		{"reports none", []wire.Denial{}, map[string]int64{}},
		{"reports some", []wire.Denial{{Limiter: "s", Key: "j", Window: 7, Cost: 4}}, map[string]int64{"s/j": 4}},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := wire.Batch{Version: wire.Version, Isolate: "i", Seq: 1, At: 1, Entries: entries, Denials: c.denials}
			var out wire.Batch
			if err := out.UnmarshalMsg(in.AppendMsg(nil)); err != nil {
				t.Fatal(err)
			}
			if out.ReportsDenials() != (c.denials != nil) {
				t.Fatalf("ReportsDenials %v after a round trip, want %v", out.ReportsDenials(), c.denials != nil)
			}
			got := collect(&out)
			if len(got) != len(c.want) {
				t.Fatalf("denials %v, want %v", got, c.want)
			}
			for k, v := range c.want {
				if got[k] != v {
					t.Fatalf("denials %v, want %v", got, c.want)
				}
			}
		})
	}
	for _, bad := range []wire.Denial{{Limiter: "s", Key: "k", Cost: 0}, {Limiter: "s", Key: "", Cost: 1}, {Limiter: "s", Key: "k", Window: -1, Cost: 1}} {
		b := wire.Batch{Version: wire.Version, Isolate: "i", Seq: 1, At: 1, Denials: []wire.Denial{bad}}
		var out wire.Batch
		if err := out.UnmarshalMsg(b.AppendMsg(nil)); err == nil || !strings.Contains(err.Error(), "dn[0]") {
			t.Errorf("denial %+v: error %v, want one naming dn[0]", bad, err)
		}
	}
}
