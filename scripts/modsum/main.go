// Command modsum prints the SHA-256 of the edgelimit module the Go host
// embeds (package wasm), so tests in other languages can check they load
// the same bytes.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/edgelimit/edgelimit/wasm"
)

func main() {
	s := sha256.Sum256(wasm.Module)
	fmt.Println(hex.EncodeToString(s[:]))
}
