//go:build !wasip1

package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// RepeatedJSONKey returns an error naming the first key data, a JSON
// document, gives twice in one object, located as LocateJSONError locates
// (line and column of the second), or nil. encoding/json takes the last
// copy of a repeated key silently: {"limit": 5, "limit": 7} set 7, in a
// configuration file and in a body of the control API alike. A document
// that is not JSON gives nil here (the decoder that reads it says why).
func RepeatedJSONKey(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	type level struct {
		keys    map[string]bool // nil: an array
		wantKey bool
	}
	var stack []level
	valueDone := func() { // a value ended: its object wants a key next
		if n := len(stack); n > 0 && stack[n-1].keys != nil {
			stack[n-1].wantKey = true
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				stack = append(stack, level{keys: map[string]bool{}, wantKey: true})
			case '[':
				stack = append(stack, level{})
			default:
				stack = stack[:len(stack)-1]
				valueDone()
			}
		case string:
			if n := len(stack); n > 0 && stack[n-1].keys != nil && stack[n-1].wantKey {
				top := &stack[n-1]
				if top.keys[t] {
					return LocateJSONError(data, dec.InputOffset(), fmt.Errorf("the key %q is given twice in one object (only one may stand)", t))
				}
				top.keys[t], top.wantKey = true, false
				continue
			}
			valueDone()
		default:
			valueDone()
		}
	}
}
