//go:build !wasip1

package wire_test

import (
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// The JavaScript package's copies of wire's bounds are wire's: the reply
// it reads at most (replybody.js) and the longest token it takes
// (options.js). A bound changed on one side only would refuse legitimate
// replies or tokens there.
func TestJSPackageBoundsAreWires(t *testing.T) {
	for _, c := range []struct {
		file, name string
		want       int64
	}{
		{"../../edge/js/src/replybody.js", "MAX_REPLY_BYTES", wire.MaxReplyBytes},
		{"../../edge/js/src/options.js", "MAX_TOKEN_LEN", wire.MaxTokenLen},
	} {
		src, err := os.ReadFile(c.file)
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`const ` + c.name + ` = (\d+);`).FindSubmatch(src)
		if m == nil {
			t.Fatalf("%s: no const %s = N;", c.file, c.name)
		}
		if got, _ := strconv.ParseInt(string(m[1]), 10, 64); got != c.want {
			t.Errorf("%s: %s = %d, wire's is %d", c.file, c.name, got, c.want)
		}
	}
}
