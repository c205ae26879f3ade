package coordinator

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/edgelimit/edgelimit/coordinator/merge"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// The control operations (control.go): each is one change, stored, in
// force at once and logged with who made it.

// ControlView is the control state in force: GET /v1/control.
type ControlView struct {
	// Generation numbers the stored control record: one more per change
	// (0: none yet).
	Generation int64 `json:"generation"`
	// LimitsGeneration numbers the limits in force (merge.Limits): 1 for
	// the configuration, one more per change of a limit or override.
	LimitsGeneration int64          `json:"limits_generation"`
	At               int64          `json:"at_ns"` // coordinator time, Unix ns
	Limiters         []LimiterLimit `json:"limiters"`
	Pauses           []Pause        `json:"pauses"`
}

// LimiterLimit is a limiter's limit and overrides in force, and the
// configuration file's.
type LimiterLimit struct {
	Name      string           `json:"name"`
	Limit     int64            `json:"limit"`
	Overrides map[string]int64 `json:"overrides"` // key -> limit in force, keys that are valid UTF-8
	// OverridesB64 are the overrides in force of keys that are not valid
	// UTF-8, by the key's bytes in unpadded base64url (JSON would show
	// each such key with U+FFFD in place of its bad bytes, and two of
	// them as one). Omitted when there are none.
	OverridesB64 map[string]int64 `json:"overrides_b64,omitempty"`
	// ConfiguredLimit and ConfiguredOverrides (ConfiguredOverridesB64,
	// as OverridesB64) are the configuration file's.
	ConfiguredLimit        int64            `json:"configured_limit"`
	ConfiguredOverrides    map[string]int64 `json:"configured_overrides"`
	ConfiguredOverridesB64 map[string]int64 `json:"configured_overrides_b64,omitempty"`
	// Changes are the run-time changes in force (their reason, who, when).
	Changes []LimitChange `json:"changes"`
}

// LimitChange is a run-time change of a limit (Key empty) or override in
// force.
type LimitChange struct {
	Key string `json:"key,omitempty"`
	// KeyB64 is Key's exact bytes in unpadded base64url (any key, valid
	// UTF-8 or not); empty for a limiter's limit.
	KeyB64 string `json:"key_b64,omitempty"`
	Limit  int64  `json:"limit"` // 0: the override removed
	Reason string `json:"reason,omitempty"`
	By     string `json:"by"`
	At     int64  `json:"at_ns"`
}

// Control returns the control state in force.
func (c *Coordinator) Control(ctx context.Context) (*ControlView, error) {
	ct := c.ctl
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if err := c.pullControl(ctx); err != nil {
		return nil, err
	}
	now := c.opts.Clock.Now()
	rec := ct.rec.clone()
	rec.prune(now)
	g := ct.limits.Load()
	v := &ControlView{Generation: rec.Gen, LimitsGeneration: g.Gen, At: now, Limiters: []LimiterLimit{}, Pauses: []Pause{}}
	for i := range g.Config.Limiters {
		l := &g.Config.Limiters[i]
		f := ct.file.Limiter(l.Name)
		ll := LimiterLimit{Name: l.Name, Limit: l.Limit, ConfiguredLimit: f.Limit, Overrides: map[string]int64{},
			ConfiguredOverrides: map[string]int64{}, Changes: []LimitChange{}}
		for _, o := range l.Overrides {
			putOverride(ll.Overrides, &ll.OverridesB64, o.Key, o.Limit)
		}
		for _, o := range f.Overrides {
			putOverride(ll.ConfiguredOverrides, &ll.ConfiguredOverridesB64, o.Key, o.Limit)
		}
		for _, s := range rec.Limits {
			if s.Limiter == l.Name {
				ll.Changes = append(ll.Changes, LimitChange{Key: string(s.Key), KeyB64: keyB64(s.Key), Limit: s.Limit, Reason: s.Reason, By: s.By, At: s.At})
			}
		}
		v.Limiters = append(v.Limiters, ll)
	}
	for _, p := range rec.Pauses {
		v.Pauses = append(v.Pauses, Pause{Limiter: p.Limiter, Key: string(p.Key), KeyB64: keyB64(p.Key), Until: p.Until, Left: p.Until - now,
			Reason: p.Reason, By: p.By, At: p.At})
	}
	return v, nil
}

// putOverride adds key's override limit to utf (a key that is valid
// UTF-8) or to *b64, made when needed (any other, by its bytes in
// unpadded base64url).
func putOverride(utf map[string]int64, b64 *map[string]int64, key string, limit int64) {
	if utf8.ValidString(key) {
		utf[key] = limit
		return
	}
	if *b64 == nil {
		*b64 = map[string]int64{}
	}
	(*b64)[keyB64([]byte(key))] = limit
}

// keyB64 returns key's bytes in unpadded base64url ("" for none).
func keyB64(key []byte) string { return base64.RawURLEncoding.EncodeToString(key) }

// SetLimit sets the limit of limiter (key "") or the override of key (limit
// 0 removes the key's override: it takes the limiter's limit again), as
// who, for reason (may be empty). A value equal to the configuration
// file's drops the run-time change.
func (c *Coordinator) SetLimit(ctx context.Context, who, limiter, key string, limit int64, reason string) error {
	if err := checkReason(reason, false); err != nil {
		return err
	}
	if limit < 0 || limit > wire.MaxLimit || limit == 0 && key == "" {
		return fmt.Errorf("%w: limit must be 1 to %d (0 removes a key's override), got %d", ErrControl, wire.MaxLimit, limit)
	}
	return c.change(ctx, who, nil, func(rec *controlRecord, file, cur *wire.Config, now int64) ([]audit, error) {
		l := cur.Limiter(limiter)
		if l == nil {
			return nil, fmt.Errorf("%w %q", merge.ErrUnknownLimiter, limiter)
		}
		old := l.LimitFor(key)
		oldText := strconv.FormatInt(old, 10)
		newText := strconv.FormatInt(limit, 10)
		if key != "" {
			if !slices.ContainsFunc(l.Overrides, func(o wire.Override) bool { return o.Key == key }) {
				if limit == 0 {
					return nil, fmt.Errorf("%w of %s", errNoOverride, target(limiter, key))
				}
				oldText = "no override (" + oldText + ")"
			}
			if limit == 0 {
				newText = "no override (" + strconv.FormatInt(l.Limit, 10) + ")"
			}
		}
		rec.setLimit(file, limitSetting{Limiter: limiter, Key: []byte(key), Limit: limit, Reason: reason, By: who, At: now})
		return []audit{{what: "limit of " + target(limiter, key), old: oldText, new: newText, reason: reason}}, nil
	})
}

// setLimit puts s in r, over the configuration file's value (its base):
// a change back to the file's value is dropped instead.
func (r *controlRecord) setLimit(file *wire.Config, s limitSetting) {
	s.Base, _ = fileValue(file, s.Limiter, string(s.Key))
	r.Limits = slices.DeleteFunc(r.Limits, func(o limitSetting) bool { return o.Limiter == s.Limiter && string(o.Key) == string(s.Key) })
	if s.Limit != s.Base {
		r.Limits = append(r.Limits, s)
	}
}

// PauseFleet pauses limiter (key "": every key) or one of its keys for d
// from now, fleet-wide, as who, for reason (required). A pause of the same
// target replaces the one in force (shorter or longer).
func (c *Coordinator) PauseFleet(ctx context.Context, who, limiter, key string, d time.Duration, reason string) error {
	if err := checkReason(reason, true); err != nil {
		return err
	}
	if d <= 0 || d > ControlMaxPause {
		return fmt.Errorf("%w: a pause lasts more than 0 and at most %s, got %s", ErrControl, ControlMaxPause, d)
	}
	return c.change(ctx, who, nil, func(rec *controlRecord, file, cur *wire.Config, now int64) ([]audit, error) {
		if cur.Limiter(limiter) == nil {
			return nil, fmt.Errorf("%w %q", merge.ErrUnknownLimiter, limiter)
		}
		p := pauseRecord{Limiter: limiter, Key: []byte(key), Until: now + int64(d), Reason: reason, By: who, At: now}
		old := "not paused"
		if i := rec.pause(limiter, key); i >= 0 {
			old = "paused until " + time.Unix(0, rec.Pauses[i].Until).UTC().Format(time.RFC3339)
			rec.Pauses[i] = p
		} else {
			if len(rec.Pauses) >= ControlMaxPauses {
				return nil, fmt.Errorf("%w: %d pauses in force already (the most)", ErrControl, ControlMaxPauses)
			}
			rec.Pauses = append(rec.Pauses, p)
		}
		return []audit{{what: "pause of " + target(limiter, key), old: old,
			new: "paused for " + d.String(), reason: reason, until: p.Until}}, nil
	})
}

// ResumeFleet ends the pause of limiter (key "") or of its key, as who,
// for reason (may be empty). Without such a pause it returns an error
// wrapping ErrControl (HTTP 404).
func (c *Coordinator) ResumeFleet(ctx context.Context, who, limiter, key, reason string) error {
	if err := checkReason(reason, false); err != nil {
		return err
	}
	return c.change(ctx, who, nil, func(rec *controlRecord, file, cur *wire.Config, now int64) ([]audit, error) {
		if cur.Limiter(limiter) == nil {
			return nil, fmt.Errorf("%w %q", merge.ErrUnknownLimiter, limiter)
		}
		i := rec.pause(limiter, key)
		if i < 0 {
			return nil, fmt.Errorf("%w of %s", errNoPause, target(limiter, key))
		}
		old := "paused until " + time.Unix(0, rec.Pauses[i].Until).UTC().Format(time.RFC3339) + " (" + rec.Pauses[i].Reason + ")"
		rec.Pauses = slices.Delete(rec.Pauses, i, i+1)
		return []audit{{what: "pause of " + target(limiter, key), old: old, new: "resumed", reason: reason}}, nil
	})
}

// pause returns the index of the pause of (limiter, key) in r, or -1.
func (r *controlRecord) pause(limiter, key string) int {
	return slices.IndexFunc(r.Pauses, func(p pauseRecord) bool { return p.Limiter == limiter && string(p.Key) == key })
}

// checkReason checks a change's reason: at most ControlMaxReason bytes,
// required when required.
func checkReason(reason string, required bool) error {
	switch {
	case required && reason == "":
		return fmt.Errorf("%w: a pause needs a reason (what it stops, why)", ErrControl)
	case len(reason) > ControlMaxReason:
		return fmt.Errorf("%w: the reason is %d bytes, at most %d", ErrControl, len(reason), ControlMaxReason)
	}
	return nil
}

// ReloadConfig makes cfg, read again from the configuration file (source
// names it in the log), the configuration's limits: each limit or override
// the file changed is in force at once, as if set through the API by
// "config file SOURCE"; a run-time change of a value the file changed is
// dropped (the file wins), the others stay. A cfg that is not valid, or
// that changes anything else than limits and overrides (limiters added or
// removed, periods, algorithms...: a restart), is refused with an error
// and changes nothing. In shared mode the file's limits are stored in the
// control record, and every coordinator of the store puts them in force
// (control_file.go).
func (c *Coordinator) ReloadConfig(ctx context.Context, cfg wire.Config, source string) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("coordinator: reload: %w", err)
	}
	who := "config file " + source
	next := merge.CloneConfig(cfg)
	return c.change(ctx, who, &next, func(rec *controlRecord, file, cur *wire.Config, now int64) ([]audit, error) {
		// Only limits and overrides change at run time: check the file
		// against the running limiters before anything changes.
		if _, err := merge.NewLimits(*cur).Publish(*file); err != nil {
			return nil, fmt.Errorf("coordinator: reload: %w", err)
		}
		var lines []audit
		for _, d := range rebase(file, rec) {
			lines = append(lines, audit{what: "run-time change", old: d, new: "dropped: the file wins"})
		}
		next := effective(*file, rec)
		lines = append(lines, fileChanges(cur, &next)...)
		if len(lines) == 0 {
			lines = append(lines, audit{what: "configuration reloaded", old: "-", new: "no limit changed"})
		}
		return lines, nil
	})
}
