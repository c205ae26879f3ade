//go:build !wasip1

package wire_test

import (
	"strings"
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

func TestCheckToken(t *testing.T) {
	for _, ok := range []string{"k", "right-token", "a.b_c~d+e/f=", strings.Repeat("x", wire.MaxTokenLen)} {
		if err := wire.CheckToken(ok); err != nil {
			t.Errorf("CheckToken(%.20q): %v, want nil", ok, err)
		}
	}
	for tok, want := range map[string]string{
		"":                                      "must be 1 to 4096 bytes, got 0",
		strings.Repeat("x", wire.MaxTokenLen+1): "got 4097",
		"secret\n":                              "byte 7 of 7 is 0xa",
		"two words":                             "byte 4 of 9 is 0x20",
		"secr€t":                                "byte 5 of 8 is 0xe2",
		"nul\x00":                               "byte 4 of 4 is 0x0",
	} {
		err := wire.CheckToken(tok)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "wire: bad bearer token: ") {
			t.Errorf("CheckToken(%.20q): %v, want an error with %q", tok, err, want)
		}
		if err != nil && len(tok) > 4 && strings.Contains(err.Error(), tok) {
			t.Errorf("CheckToken: the error shows the token: %v", err)
		}
	}
}
