package main

import (
	"context"
	"crypto/sha256"
	"flag"
	"fmt"
	"io"
	"runtime/debug"

	"github.com/edgelimit/edgelimit/wasm"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

func init() {
	commands["version"] = command{summary: "print the build, the wire protocol and the embedded edge module's versions", run: runVersion}
}

// runVersion is `edgelimit version`: the Go module's version and VCS
// revision (from the build info), the wire protocol version, and the size
// and SHA-256 of the embedded edge module (wasm.Module).
func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: edgelimit version [-h]\n\nPrints the build, the wire protocol and the embedded edge module's versions.\n")
	}
	if err := parseFlags(fs, args); err != nil {
		return fmt.Errorf("version: %w", err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("version: unexpected argument %q", fs.Arg(0))
	}
	writeVersion(stdout)
	return nil
}

// writeVersion writes what runVersion prints to w.
func writeVersion(w io.Writer) {
	version, goVersion, rev, when, modified := "(unknown)", "(unknown)", "", "", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		goVersion = bi.GoVersion
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					modified = " (modified)"
				}
			}
		}
	}
	fmt.Fprintf(w, "edgelimit %s\n", version)
	if rev != "" {
		fmt.Fprintf(w, "revision  %s%s %s\n", rev, modified, when)
	}
	fmt.Fprintf(w, "protocol  %d\n", wire.Version)
	fmt.Fprintf(w, "module    edgelimit.wasm, %d bytes, sha256 %x\n", len(wasm.Module), sha256.Sum256(wasm.Module))
	fmt.Fprintf(w, "go        %s\n", goVersion)
}
