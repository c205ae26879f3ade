//go:build !wasip1

package wire

import (
	"strings"
	"testing"
)

// TestFileBurstOnWindow: a burst is a bucket's capacity; the file refuses
// it on a window algorithm, naming the field, as the JavaScript package does.
func TestFileBurstOnWindow(t *testing.T) {
	for _, alg := range []string{FixedWindow, SlidingWindow} {
		_, err := ParseConfigJSON([]byte(`{"limiters": [{"name": "a", "algorithm": "` + alg + `", "limit": 5, "period": "1s", "burst": 10}]}`))
		if err == nil || !strings.Contains(err.Error(), "limiters[0].burst: only token_bucket and gcra have a burst") {
			t.Fatalf("%s with a burst: %v", alg, err)
		}
	}
	for _, alg := range []string{TokenBucket, GCRA} {
		if _, err := ParseConfigJSON([]byte(`{"limiters": [{"name": "a", "algorithm": "` + alg + `", "limit": 5, "period": "1s", "burst": 10}]}`)); err != nil {
			t.Fatalf("%s with a burst: %v", alg, err)
		}
	}
}
