//go:build !wasip1

package wire_test

import (
	"strings"
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestRepeatedJSONKey: a key given twice in one object is named with its
// place, at any depth; the same key in different objects, keys inside
// strings and arrays, and documents that are not JSON give nil.
func TestRepeatedJSONKey(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`{"limit": 5, "limit": 7}`, `"limit" is given twice`},
		{"{\"limiters\": [{\"name\": \"a\",\n \"overrides\": {\"acme\": 1, \"acme\": 2}}]}", `line 2`},
		{`{"a": {"x": 1}, "b": {"x": 1}, "c": [{"x": 1}, {"x": 2}]}`, ""},
		{`{"a": "a", "b": ["a", "a"], "c": {"a": [1, {"a": 2}]}}`, ""},
		{`{"a": [], "b": {}, "c": null, "a2": true}`, ""},
		{`{"a": 1,`, ""},
		{`[{"k": 1, "k": 2}]`, `"k" is given twice`},
	} {
		err := wire.RepeatedJSONKey([]byte(tc.doc))
		if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.doc, err, tc.want)
		}
	}
	// A configuration file with a repeated field is refused, naming it
	// (it took the last copy: 7).
	_, err := wire.ParseConfigJSON([]byte(`{"limiters": [{"name": "a", "algorithm": "fixed_window", "limit": 5, "limit": 7, "period": "1s"}]}`))
	if err == nil || !strings.Contains(err.Error(), `"limit" is given twice`) {
		t.Errorf("a configuration with limit twice: %v", err)
	}
}
