package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/edgelimit/edgelimit/coordinator"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// reloadOnHUP reads the configuration file path again on every SIGHUP
// until ctx ends and puts its limits in force (Coordinator.ReloadConfig:
// the same effect as the control API, audit lines included). A file that
// does not load, or that changes more than limits and overrides, is
// refused with a log line, and the configuration in force stays. The
// file's "coordinator" settings are read at start only; settings(data)
// checks them, so that a file the next start would refuse (an unknown
// setting) is refused now too.
func reloadOnHUP(ctx context.Context, c *coordinator.Coordinator, path string, log *slog.Logger, settings func(data []byte) error) {
	onHUP(ctx, func() {
		data, err := wire.ReadConfigFile(path)
		var cfg wire.Config
		if err == nil {
			cfg, err = wire.ParseConfigJSON(data)
		}
		if err == nil {
			err = settings(data)
		}
		if err == nil {
			err = c.ReloadConfig(ctx, cfg, path)
		}
		if err != nil {
			log.Error(fmt.Sprintf("coordinator: SIGHUP: %s refused, the configuration in force stays: %v", path, err), "config", path, "error", err.Error())
			return
		}
		log.Info("coordinator: SIGHUP: "+path+" reloaded", "config", path)
	})
}

// onHUP calls fn on every SIGHUP until ctx ends (each caller has its own
// subscription: the signal reaches all of them).
func onHUP(ctx context.Context, fn func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				fn()
			}
		}
	}()
}
