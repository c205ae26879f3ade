package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
)

// logFlags are the logging flags every long-running command takes
// (--log-format, --log-level); logger builds the log/slog logger they say.
type logFlags struct {
	format, level *string
}

// addLogFlags registers --log-format (text or json, default text) and
// --log-level (debug, info, warn, error, default info) on fs; logEnv names
// their environment variables for applyEnv.
func addLogFlags(fs *flag.FlagSet) logFlags {
	return logFlags{
		format: fs.String("log-format", "text", "log `FORMAT`: text (key=value lines) or json"),
		level:  fs.String("log-level", "info", "least `LEVEL` logged: debug, info, warn or error"),
	}
}

// logEnv names the environment variables of the logging flags.
var logEnv = map[string]string{"log-format": "EDGELIMIT_LOG_FORMAT", "log-level": "EDGELIMIT_LOG_LEVEL"}

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
