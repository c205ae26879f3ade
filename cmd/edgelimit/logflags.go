package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
)

// logFlags are the logging flags every long-running command takes
// (--log-format, --log-level); logger builds the log/slog logger they say.
type logFlags struct {
	format, level *string
}

// addLogFlags registers --log-format (text or json, default text; from
// EDGELIMIT_LOG_FORMAT) and --log-level (debug, info, warn, error, default
// info; from EDGELIMIT_LOG_LEVEL) on fs.
func addLogFlags(fs *flag.FlagSet) logFlags {
	return logFlags{
		format: fs.String("log-format", envOr("EDGELIMIT_LOG_FORMAT", "text"), "log `FORMAT`: text (key=value lines) or json"),
		level:  fs.String("log-level", envOr("EDGELIMIT_LOG_LEVEL", "info"), "least `LEVEL` logged: debug, info, warn or error"),
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// logger returns the logger the flags say, writing to w.
func (f logFlags) logger(w io.Writer) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(*f.level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", *f.level)
	}
	o := &slog.HandlerOptions{Level: lv}
	switch *f.format {
	case "text":
		return slog.New(slog.NewTextHandler(w, o)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, o)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", *f.format)
}
