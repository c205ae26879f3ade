package main

import (
	"context"
	"io"
	"strings"
	"testing"
)

// TestCoordinatorMaxMemory: --max-memory (and EDGELIMIT_MAX_MEMORY) take a
// size with a unit and refuse what the coordinator cannot be sized for.
func TestCoordinatorMaxMemory(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"--in-memory", "--max-memory", "64MiB"}, "", "at least 128 MiB"},
		{[]string{"--in-memory", "--max-memory", "lots"}, "", `invalid value "lots" for flag -max-memory`},
		{[]string{"--in-memory", "--max-memory", "-1GiB"}, "", "whole number of bytes"},
		{[]string{"--in-memory"}, "1KiB", "EDGELIMIT_MAX_MEMORY"},
	} {
		t.Setenv("EDGELIMIT_MAX_MEMORY", tc.env)
		err := runCoordinator(context.Background(), tc.args, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "coordinator: ") {
			t.Errorf("%v (EDGELIMIT_MAX_MEMORY=%q): err %v, want %q", tc.args, tc.env, err, tc.want)
		}
	}
}
