package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/edgelimit/edgelimit/coordinator/merge"
)

// The control record (control.go) is stored as JSON: under the storage
// key controlKey in Pebble, written directly (this process is its only
// writer); in shared mode by the store itself (ControlStore: the Redis
// store keeps it in one key every coordinator reads, written only over the
// generation the writer read).

// controlKey is the Pebble storage key of the control record: a prefix of
// its own ('c'), which no scan of the Merger visits.
var controlKey = []byte("c/control")

// ControlStore is a shared store (merge.SharedStore) that keeps the control
// record for every coordinator that shares it (redisstore.Store does).
// Without it, a coordinator in shared mode refuses control changes
// (ErrSharedControl).
type ControlStore interface {
	// LoadControl returns the control record and its generation (0:
	// none yet), the record nil when its generation is known.
	LoadControl(ctx context.Context, known int64) ([]byte, int64, error)
	// SaveControl stores value, the record of generation gen, unless the
	// stored record is no longer of generation prev (0: none): then it
	// stores nothing and returns false.
	SaveControl(ctx context.Context, prev, gen int64, value []byte) (bool, error)
}

// ErrSharedControl is returned for a control change in shared mode over a
// store that does not implement ControlStore: HTTP 501.
var ErrSharedControl = errors.New("coordinator: live control needs a store that keeps the control record (ControlStore) in shared mode")

// controlRecord is the stored control state: the run-time limit changes
// and the pauses in force.
type controlRecord struct {
	Gen    int64          `json:"gen"`
	Limits []limitSetting `json:"limits,omitempty"`
	Pauses []pauseRecord  `json:"pauses,omitempty"`
	// Told are, per paused limiter, the keys told of its pause when the
	// coordinator last closed (Close writes them, Open reads them back):
	// a resume after a restart still sends their reset notices.
	Told map[string][][]byte `json:"told,omitempty"`
	// File is, in shared mode, the configuration file's limits every
	// coordinator of the store runs: the file read last (control_file.go);
	// nil in Pebble mode, or before any coordinator wrote it.
	File *fileLayer `json:"file,omitempty"`
}

// limitSetting is a run-time change of a limiter's limit (Key empty) or
// of a key's override.
type limitSetting struct {
	Limiter string `json:"limiter"`
	Key     []byte `json:"key,omitempty"` // base64 in JSON: keys are any bytes
	// Limit is the limit in force; 0 for an override removed.
	Limit int64 `json:"limit"`
	// Base is the configuration file's value the change was made over
	// (the limit, or the key's override, 0: none): a file that says
	// otherwise since wins.
	Base   int64  `json:"base"`
	Reason string `json:"reason,omitempty"`
	By     string `json:"by"`
	At     int64  `json:"at_ns"`
}

// pauseRecord is a Pause as stored.
type pauseRecord struct {
	Limiter string `json:"limiter"`
	Key     []byte `json:"key,omitempty"`
	Until   int64  `json:"until_ns"`
	Reason  string `json:"reason"`
	By      string `json:"by"`
	At      int64  `json:"at_ns"`
}

// clone returns a copy of r that shares no slice with it.
func (r controlRecord) clone() controlRecord {
	r.Limits = slices.Clone(r.Limits)
	r.Pauses = slices.Clone(r.Pauses)
	return r
}

// prune drops the pauses that ended by now.
func (r *controlRecord) prune(now int64) {
	r.Pauses = slices.DeleteFunc(r.Pauses, func(p pauseRecord) bool { return p.Until <= now })
}

// controlStore reads and writes the control record.
type controlStore interface {
	// load returns the stored record unless its generation is known
	// (nil: none, or of generation known).
	load(ctx context.Context, known int64) (*controlRecord, error)
	// save stores rec unless the stored record's generation is no longer
	// prev (false: nothing stored).
	save(ctx context.Context, prev int64, rec *controlRecord) (bool, error)
	// shared reports whether other coordinators may write the record
	// (pullControl reads it then).
	shared() bool
}

// errCorruptControl is returned, with an empty record of the stored
// generation, for a stored control record that does not decode: the
// coordinator logs it and runs on the configuration file's limits until
// the next change overwrites the record.
var errCorruptControl = errors.New("coordinator: the stored control record does not decode")

// decodeControl decodes b, the record of generation gen (nil: none).
func decodeControl(b []byte, gen int64) (*controlRecord, error) {
	if b == nil {
		return nil, nil
	}
	rec := new(controlRecord)
	if err := json.Unmarshal(b, rec); err != nil {
		return &controlRecord{Gen: gen}, fmt.Errorf("%w: %w", errCorruptControl, err)
	}
	return rec, nil
}

// pebbleControl keeps the record in the coordinator's own store.
type pebbleControl struct{ s merge.Store }

func (pebbleControl) shared() bool { return false }

func (p pebbleControl) load(context.Context, int64) (*controlRecord, error) {
	b, found, err := p.s.Get(controlKey)
	if err != nil || !found {
		return nil, err
	}
	return decodeControl(b, 0)
}

func (p pebbleControl) save(_ context.Context, _ int64, rec *controlRecord) (bool, error) {
	b, err := json.Marshal(rec)
	if err != nil {
		return false, err
	}
	return true, p.s.Commit([]merge.Op{{Key: controlKey, Value: b}})
}

// sharedControl keeps the record in a ControlStore.
type sharedControl struct{ s ControlStore }

func (sharedControl) shared() bool { return true }

func (s sharedControl) load(ctx context.Context, known int64) (*controlRecord, error) {
	b, gen, err := s.s.LoadControl(ctx, known)
	if err != nil {
		return nil, err
	}
	return decodeControl(b, gen)
}

func (s sharedControl) save(ctx context.Context, prev int64, rec *controlRecord) (bool, error) {
	b, err := json.Marshal(rec)
	if err != nil {
		return false, err
	}
	return s.s.SaveControl(ctx, prev, rec.Gen, b)
}

// noControl is a shared store without ControlStore: nothing stored, every
// change refused.
type noControl struct{}

func (noControl) shared() bool                                        { return false }
func (noControl) load(context.Context, int64) (*controlRecord, error) { return nil, nil }
func (noControl) save(context.Context, int64, *controlRecord) (bool, error) {
	return false, ErrSharedControl
}
