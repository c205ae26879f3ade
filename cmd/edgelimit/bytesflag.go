package main

import (
	"flag"
	"strconv"

	"github.com/edgelimit/edgelimit/coordinator"
)

// bytesValue is a flag.Value holding a size in bytes read by
// coordinator.ParseBytes ("768MiB", "1GiB", or a number of bytes) and
// accepted by check.
type bytesValue struct {
	v     *int64
	check func(int64) error
}

func (b bytesValue) String() string {
	if b.v == nil {
		return "0"
	}
	return strconv.FormatInt(*b.v, 10)
}

// Set parses s with coordinator.ParseBytes and checks it.
func (b bytesValue) Set(s string) error {
	v, err := coordinator.ParseBytes(s)
	if err == nil && b.check != nil {
		err = b.check(v)
	}
	if err != nil {
		return err
	}
	*b.v = v
	return nil
}

// bytesFlag defines a size flag on fs (coordinator.ParseBytes), default def
// bytes; check (if not nil) refuses a value out of range.
func bytesFlag(fs *flag.FlagSet, name string, def int64, check func(int64) error, usage string) *int64 {
	v := def
	fs.Var(bytesValue{v: &v, check: check}, name, usage)
	return &v
}
