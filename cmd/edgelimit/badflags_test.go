package main

import (
	"strings"
	"testing"
)

// Flags that could only run wrong are refused, naming the flag: a bench
// argument that ended the flags (every benchmark ran), no runs (each said
// "did not run" and it exited 0), a negative duration (NaN figures); an
// edge's sync interval the module does not take (1 ns spun both cores;
// 31 s was refused for a backoff the user never set, and is taken now).
func TestBadFlagsRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "foo", "--run", "x"}, `bench: unexpected argument "foo"`},
		{[]string{"bench", "--runs", "0"}, "bench: --runs 0: want at least 1"},
		{[]string{"coordinator", "--in-memory", "--max-isolates-per-key", "-1"}, "--max-isolates-per-key -1: want 1 to 65536"},
		{[]string{"sim", "--max-isolates-per-key", "70000"}, "--max-isolates-per-key 70000: want 1 to 65536"},
		{[]string{"bench", "--duration", "-1s"}, "bench: --duration -1s: want a positive duration"},
		{[]string{"edge", "--sync", "1ns", "--listen", "127.0.0.1:0"}, "the sync interval must be from 1ms to 1h0m0s, got 1ns"},
		{[]string{"edge", "--sync", "2h", "--listen", "127.0.0.1:0"}, "got 2h0m0s"},
	} {
		_, _, err := run(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error with %q", tc.args, err, tc.want)
		}
	}
}
