package coordinator

import (
	"strings"
	"testing"

	"github.com/edgelimit/edgelimit/coordinator/redisstore"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Over Redis an isolate id with braces is refused (400, field iso): the
// cluster hashes a key on its first {...}, and the isolate's mark key has
// none before the id, so such ids chose the master of every mark of a
// client's isolates. Over Pebble it is an id like any.
func TestBracedIsolateIDRefusedOverRedis(t *testing.T) {
	for _, redis := range []bool{false, true} {
		_, clk, srv := newTestServer(t, func(o *Options) {
			if redis {
				o.Store = openTestRedis(t, redisstore.Options{Buckets: 16})
			}
		})
		for _, iso := range []string{"edge-{t}", "edge-}{", "edge-t"} {
			b := batch(iso, 1, clk.now(), wire.Delta{Limiter: "fw", Key: "k", Window: clk.now() / sec, Delta: 1})
			st, body := httpPost(t, srv, MsgpackContentType, b.AppendMsg(nil), nil)
			want := 200
			if redis && iso != "edge-t" {
				want = 400
				if p := decodeProblem(t, body); st == 400 && (p.Field != "iso" || !strings.Contains(p.Detail, "must not contain { or }")) {
					t.Errorf("%s: %+v", iso, p)
				}
			}
			if st != want {
				t.Errorf("redis %v, isolate %q: %d %s, want %d", redis, iso, st, body, want)
			}
		}
	}
}
