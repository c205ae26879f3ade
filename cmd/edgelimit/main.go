// Command edgelimit is the one CLI of the project:
//
//	edgelimit coordinator   run the coordinator server (Pebble, or Redis Cluster with --store)
//	edgelimit edge          run an edge host: isolates behind an HTTP API
//	edgelimit sim           run the simulator
//	edgelimit bench         run side-by-side benchmarks
//	edgelimit version       print the build, protocol and module versions
//
// Each subcommand lives in its own file and registers itself in commands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// command runs one subcommand with its arguments (without the subcommand name).
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commands is filled by the init functions of the subcommand files.
var commands = map[string]command{}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, errUsage) {
			fmt.Fprintln(os.Stderr, "edgelimit:", err)
		}
		os.Exit(2)
	}
}

// errUsage is Main's error after it printed the usage; main prints nothing
// more. Main's errors carry no "edgelimit:" prefix: main adds the one.
var errUsage = errors.New("usage")

// Main runs the CLI; tests call it directly.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return errUsage
		}
		return nil
	}
	c, ok := commands[args[0]]
	if !ok {
		usage(stderr)
		return fmt.Errorf("unknown command %q", args[0])
	}
	// -h on any command prints its flags and succeeds.
	if err := c.run(ctx, args[1:], stdout, stderr); !errors.Is(err, flag.ErrHelp) {
		return err
	}
	return nil
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: edgelimit <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-12s %s\n", n, commands[n].summary)
	}
}
