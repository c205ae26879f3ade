package coordinator

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/edgelimit/edgelimit/coordinator/merge"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// In shared mode (Redis) every coordinator runs the limits of the
// configuration file read last by any of them: the file's limits and
// overrides are a layer of the shared control record (fileLayer), written
// at a coordinator's start when its file's limits differ from the layer's
// (or there is none yet) and at every reload (SIGHUP), and adopted by the
// others within ControlPoll, as a change through the API is. A run-time
// change is made over the layer's value (its base), the same for every
// coordinator. Before, each coordinator ran its own file: a reload reached
// only the coordinator that got the signal, and the others kept the old
// limits, against the same shared counts, until they got it too.
//
// The latest file read wins, as a file does over run-time changes: a
// coordinator restarted with an older file than the others read puts the
// older limits in force on all of them (it logs that, with an audit line
// per limit changed).

// fileLayer is the configuration file's limits the coordinators of a
// shared store run.
type fileLayer struct {
	Limiters []fileLimits `json:"limiters"`
	// By is what read the file ("config file PATH", or a start's).
	By string `json:"by"`
	At int64  `json:"at_ns"`
}

// fileLimits is one limiter's limit and overrides in a fileLayer.
type fileLimits struct {
	Name      string         `json:"name"`
	Limit     int64          `json:"limit"`
	Overrides []fileOverride `json:"overrides,omitempty"`
}

// fileOverride is a key's override in a fileLayer (the key in base64 in
// JSON: keys are any bytes).
type fileOverride struct {
	Key   []byte `json:"key"`
	Limit int64  `json:"limit"`
}

// layerOf returns cfg's limits as a layer read by by at now (ns).
func layerOf(cfg *wire.Config, by string, now int64) *fileLayer {
	fl := &fileLayer{By: by, At: now, Limiters: make([]fileLimits, 0, len(cfg.Limiters))}
	for i := range cfg.Limiters {
		l := &cfg.Limiters[i]
		fls := fileLimits{Name: l.Name, Limit: l.Limit}
		for _, o := range l.Overrides {
			fls.Overrides = append(fls.Overrides, fileOverride{Key: []byte(o.Key), Limit: o.Limit})
		}
		fl.Limiters = append(fl.Limiters, fls)
	}
	return fl
}

// layered returns own, a coordinator's configuration file, with the
// limits and overrides of fl (nil: none) for each limiter both have.
func layered(own wire.Config, fl *fileLayer) wire.Config {
	cfg := merge.CloneConfig(own)
	if fl == nil {
		return cfg
	}
	for _, f := range fl.Limiters {
		l := cfg.Limiter(f.Name)
		if l == nil {
			continue // not run here (a start refuses differing limiters: sharedlimiters.go)
		}
		l.Limit = f.Limit
		l.Overrides = make([]wire.Override, 0, len(f.Overrides))
		for _, o := range f.Overrides {
			l.Overrides = append(l.Overrides, wire.Override{Key: string(o.Key), Limit: o.Limit})
		}
	}
	return cfg
}

// sameFile reports whether fl (nil: none) holds own's limits and
// overrides.
func sameFile(own wire.Config, fl *fileLayer) bool {
	return fl != nil && slices.EqualFunc(layered(own, fl).Limiters, own.Limiters, sameLimits)
}

// fileChanges returns an audit line for each limit and override that
// differs from old to next.
func fileChanges(old, next *wire.Config) []audit {
	var lines []audit
	for i := range next.Limiters {
		n, o := &next.Limiters[i], old.Limiter(next.Limiters[i].Name)
		if o == nil {
			continue
		}
		if n.Limit != o.Limit {
			lines = append(lines, audit{what: "limit of " + target(n.Name, ""), old: strconv.FormatInt(o.Limit, 10), new: strconv.FormatInt(n.Limit, 10)})
		}
		keys := map[string]bool{}
		for _, x := range append(slices.Clone(n.Overrides), o.Overrides...) {
			keys[x.Key] = true
		}
		for _, k := range slices.Sorted(maps.Keys(keys)) {
			if a, b := o.LimitFor(k), n.LimitFor(k); a != b {
				lines = append(lines, audit{what: "limit of " + target(n.Name, k), old: strconv.FormatInt(a, 10), new: strconv.FormatInt(b, 10)})
			}
		}
	}
	return lines
}

// shareFile writes, at a start in shared mode, this coordinator's file as
// the layer every coordinator runs, unless the stored layer already holds
// its limits: the run-time changes made over other values are dropped
// (the file wins), each with an audit line, as at a reload.
func (c *Coordinator) shareFile(ctx context.Context) error {
	ct := c.ctl
	ct.mu.Lock()
	stored, own := ct.rec.File, merge.CloneConfig(ct.own)
	ct.mu.Unlock()
	if sameFile(own, stored) {
		return nil
	}
	err := c.change(ctx, "configuration file at a coordinator's start", &own, func(rec *controlRecord, file, cur *wire.Config, now int64) ([]audit, error) {
		var lines []audit
		for _, d := range rebase(file, rec) {
			lines = append(lines, audit{what: "run-time change", old: d, new: "dropped: the file wins"})
		}
		next := effective(*file, rec)
		lines = append(lines, fileChanges(cur, &next)...)
		if len(lines) > 0 {
			c.log.Warn("coordinator: control: this coordinator's configuration file differs from the limits the coordinators of the store ran; its limits are now in force on all of them (the file read last wins)")
		}
		return lines, nil
	})
	if err != nil {
		return fmt.Errorf("coordinator: sharing the configuration file's limits: %w", err)
	}
	return nil
}
