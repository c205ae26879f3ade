package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// durationValue is a flag.Value holding a duration read by
// wire.ParseDuration: a Go duration, or days with "d" ("1d", "1d12h"), the
// same syntax as the config file's durations.
type durationValue time.Duration

func (d *durationValue) String() string { return time.Duration(*d).String() }

// Set parses s with wire.ParseDuration.
func (d *durationValue) Set(s string) error {
	v, err := wire.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = durationValue(v)
	return nil
}

// checkedDuration is a durationValue that check accepts (run on every
// value set, the flag's error names the flag and the value).
type checkedDuration struct {
	durationValue
	check func(time.Duration) error
}

// Set parses s as durationValue does and checks it.
func (d *checkedDuration) Set(s string) error {
	var v durationValue
	if err := v.Set(s); err != nil {
		return err
	}
	if err := d.check(time.Duration(v)); err != nil {
		return err
	}
	d.durationValue = v
	return nil
}

// checkedDurationFlag is durationFlag with check run on the value given
// (the default is not checked).
func checkedDurationFlag(fs *flag.FlagSet, name string, def time.Duration, check func(time.Duration) error, usage string) *time.Duration {
	d := &checkedDuration{durationValue: durationValue(def), check: check}
	fs.Var(d, name, usage)
	return (*time.Duration)(&d.durationValue)
}

// durationFlag defines a duration flag on fs like fs.Duration, but
// parsed by wire.ParseDuration (so "1d" is a day).
func durationFlag(fs *flag.FlagSet, name string, def time.Duration, usage string) *time.Duration {
	d := def
	fs.Var((*durationValue)(&d), name, usage)
	return &d
}

// applyEnv sets each flag of fs named in vars (flag name to environment
// variable) that the command line did not set from its variable, when
// that is set and not empty, through fs.Set: a value is parsed and refused
// exactly as the flag's, and the error names the variable.
func applyEnv(fs *flag.FlagSet, vars map[string]string) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	names := make([]string, 0, len(vars))
	for name := range vars {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		v := os.Getenv(vars[name])
		if set[name] || v == "" {
			continue
		}
		if err := fs.Set(name, v); err != nil {
			return fmt.Errorf("invalid value %q in %s for flag --%s: %w", v, vars[name], name, err)
		}
	}
	return nil
}

// checkCoordinatorURLs returns an error unless list, a comma-separated
// list of coordinator base URLs (empty: none; empty entries are skipped),
// has only absolute http or https URLs with a host, and at least one.
func checkCoordinatorURLs(list string) error {
	if list == "" {
		return nil
	}
	n := 0
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		n++
		const want = "want http://HOST[:PORT] or https://HOST[:PORT], e.g. http://127.0.0.1:7070"
		u, err := url.Parse(s)
		if err != nil {
			return fmt.Errorf("coordinator URL %q: %s: %w", s, want, err)
		}
		if u.Scheme != "http" && u.Scheme != "https" || u.Hostname() == "" {
			return fmt.Errorf("coordinator URL %q: %s", s, want)
		}
	}
	if n == 0 {
		return fmt.Errorf("coordinator URL list %q names no URL", list)
	}
	return nil
}

// parseFlags parses args into fs. A bad flag is one line, the flag
// package's error and where the usage is ("run ... -h"), not the whole
// usage before it; -h prints the usage (and returns flag.ErrHelp).
func parseFlags(fs *flag.FlagSet, args []string) error {
	out, usage := fs.Output(), fs.Usage
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.SetOutput(out)
	fs.Usage = usage
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		if usage != nil {
			usage()
		} else {
			fs.PrintDefaults()
		}
		return err
	}
	return fmt.Errorf("%w (run edgelimit %s -h for the flags)", err, fs.Name())
}
