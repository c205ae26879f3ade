//go:build !wasip1

package wire

import (
	"errors"
	"strconv"
)

// MaxTokenLen is the longest bearer token CheckToken accepts, in bytes.
const MaxTokenLen = 4096

// CheckToken reports whether tok can be a bearer token of the sync
// protocol (the Authorization header's "Bearer TOKEN"): 1 to MaxTokenLen
// visible ASCII characters (0x21 to 0x7E). A space, a control character (a
// newline left from a secret file) or a non-ASCII one is refused: HTTP
// clients send it altered or not at all (fetch refuses what is past
// Latin-1), so the coordinator could never match it. The error names the
// offending byte's position and value, never the token.
func CheckToken(tok string) error {
	if tok == "" || len(tok) > MaxTokenLen {
		return errors.New("wire: bad bearer token: must be 1 to " + strconv.Itoa(MaxTokenLen) + " bytes, got " + strconv.Itoa(len(tok)))
	}
	for i := 0; i < len(tok); i++ {
		if c := tok[i]; c < 0x21 || c > 0x7e {
			return errors.New("wire: bad bearer token: byte " + strconv.Itoa(i+1) + " of " + strconv.Itoa(len(tok)) +
				" is 0x" + strconv.FormatUint(uint64(c), 16) + ": want visible ASCII (0x21-0x7e), no spaces")
		}
	}
	return nil
}
