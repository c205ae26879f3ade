package wire

import (
	"errors"
	"strconv"
)

// DecideRequest is the input of the Extism-style "decide" export: several
// limiters checked together, all or nothing, at time Now.
type DecideRequest struct {
	Version int64   `msgpack:"v"`
	Now     int64   `msgpack:"now"`         // ns
	Checks  []Check `msgpack:"c,omitempty"` // 1..MaxChecks
}

// Check is one (limiter, key, cost) of a decision, encoded as the array
// [limiter, key, cost]. Cost 0 peeks without consuming.
type Check struct {
	//lint:ignore U1000 read by msgpack/v5 (reflection): encode as an array
	_msgpack struct{} `msgpack:",as_array"`
	Limiter  string
	Key      string
	Cost     int64
}

// Decision is the result of a decision. When several limiters are checked,
// the fields describe the binding one: the first that denied, or else the
// one with the least remaining.
// AppendMsg also writes "v" (Version); decoding ignores it.
type Decision struct {
	Allowed    bool   `msgpack:"allowed"`
	Limit      int64  `msgpack:"limit"`          // the limit of the binding limiter for this key
	Remaining  int64  `msgpack:"remaining"`      // cost still admissible now, >= 0
	Reset      int64  `msgpack:"reset_ns"`       // ns time when the window ends or the bucket is full again
	RetryAfter int64  `msgpack:"retry_after_ns"` // ns to wait before the same request could pass; 0 when allowed
	SyncWanted bool   `msgpack:"sync"`           // the isolate asks the host for an early sync
	SyncRetry  bool   `msgpack:"sync_retry"`     // strict mode denied only for want of a lease: sync and decide again
	Limiter    string `msgpack:"limiter"`        // name of the binding limiter
}

// AppendMsg appends q encoded as msgpack.
func (q *DecideRequest) AppendMsg(b []byte) []byte {
	b = AppendMapHeader(b, 3)
	b = AppendString(b, "v")
	b = AppendInt(b, q.Version)
	b = AppendString(b, "now")
	b = AppendInt(b, q.Now)
	b = AppendString(b, "c")
	b = AppendArrayHeader(b, len(q.Checks))
	for _, c := range q.Checks {
		b = AppendArrayHeader(b, 3)
		b = AppendString(b, c.Limiter)
		b = AppendString(b, c.Key)
		b = AppendInt(b, c.Cost)
	}
	return b
}

// UnmarshalMsg decodes a decide request. Keys and costs are checked by the
// limiter core, which owns those rules.
func (q *DecideRequest) UnmarshalMsg(src []byte) error {
	*q = DecideRequest{}
	r := NewReader(src)
	for n := r.ReadMapHeader(); n > 0 && r.err == nil; n-- {
		switch string(r.ReadStringBytes()) {
		case "v":
			q.Version = r.ReadInt()
		case "now":
			q.Now = r.ReadInt()
		case "c":
			m := r.ReadArrayHeader()
			if m < 1 || m > MaxChecks {
				r.SetErr("c", errors.New("want 1 to "+strconv.Itoa(MaxChecks)+" checks, got "+strconv.Itoa(m)))
				break
			}
			q.Checks = make([]Check, m)
			for i := 0; i < m && r.err == nil; i++ {
				if r.ReadArrayHeader() != 3 && r.err == nil {
					r.SetErr("c", errors.New("each check is [limiter, key, cost]"))
					break
				}
				q.Checks[i] = Check{Limiter: r.ReadString(), Key: r.ReadString(), Cost: r.ReadInt()}
			}
		default:
			r.Skip()
		}
	}
	if err := r.Done(); err != nil {
		return err
	}
	if q.Version != Version {
		return &FieldError{"v", errors.New("version " + strconv.FormatInt(q.Version, 10) + " is not supported")}
	}
	if len(q.Checks) == 0 {
		return &FieldError{"c", errors.New("at least one check is required")}
	}
	return nil
}

// AppendMsg appends d encoded as msgpack.
func (d *Decision) AppendMsg(b []byte) []byte {
	b = AppendMapHeader(b, 9)
	b = AppendString(b, "v")
	b = AppendInt(b, Version)
	b = AppendString(b, "allowed")
	b = AppendBool(b, d.Allowed)
	b = AppendString(b, "limit")
	b = AppendInt(b, d.Limit)
	b = AppendString(b, "remaining")
	b = AppendInt(b, d.Remaining)
	b = AppendString(b, "reset_ns")
	b = AppendInt(b, d.Reset)
	b = AppendString(b, "retry_after_ns")
	b = AppendInt(b, d.RetryAfter)
	b = AppendString(b, "sync")
	b = AppendBool(b, d.SyncWanted)
	b = AppendString(b, "sync_retry")
	b = AppendBool(b, d.SyncRetry)
	b = AppendString(b, "limiter")
	return AppendString(b, d.Limiter)
}

// UnmarshalMsg decodes a decision.
func (d *Decision) UnmarshalMsg(src []byte) error {
	*d = Decision{}
	r := NewReader(src)
	for n := r.ReadMapHeader(); n > 0 && r.err == nil; n-- {
		switch string(r.ReadStringBytes()) {
		case "allowed":
			d.Allowed = r.ReadBool()
		case "limit":
			d.Limit = r.ReadInt()
		case "remaining":
			d.Remaining = r.ReadInt()
		case "reset_ns":
			d.Reset = r.ReadInt()
		case "retry_after_ns":
			d.RetryAfter = r.ReadInt()
		case "sync":
			d.SyncWanted = r.ReadBool()
		case "sync_retry":
			d.SyncRetry = r.ReadBool()
		case "limiter":
			d.Limiter = r.ReadString()
		default:
			r.Skip()
		}
	}
	return r.Done()
}

// Stats are an isolate's counters since it started.
type Stats struct {
	Keys            int64 `msgpack:"keys"`             // keys tracked now
	Decisions       int64 `msgpack:"decisions"`        // decisions made (each check of a multi-limiter call counts once)
	Denials         int64 `msgpack:"denials"`          // decisions that denied
	Evictions       int64 `msgpack:"evictions"`        // keys evicted to respect the key cap
	EvictedUnsynced int64 `msgpack:"evicted_unsynced"` // cost lost because a key was evicted before it synced
	StateBytes      int64 `msgpack:"state_bytes"`      // approximate bytes held by the key table
	Batches         int64 `msgpack:"batches"`          // batches cut by sync_out (retries not counted)
	Replies         int64 `msgpack:"replies"`          // replies applied by sync_in
	ClockBackwards  int64 `msgpack:"clock_backwards"`  // decisions whose time was earlier than the key's last time
	Errors          int64 `msgpack:"errors"`           // calls that returned an error
	UnsyncedCost    int64 `msgpack:"unsynced_cost"`    // cost admitted here that the coordinator has not acknowledged (buffered while it is away)
	UpstreamIgnored int64 `msgpack:"upstream_ignored"` // upstream header values ignored (unreadable, out of range, dates in the past)
	UpstreamPauses  int64 `msgpack:"upstream_pauses"`  // pauses of a key begun or extended by an upstream's answer, here or via the coordinator
	CircuitOpens    int64 `msgpack:"circuit_opens"`    // times a key's circuit opened here (its own failures or the fleet's)
	ForeignLimits   int64 `msgpack:"foreign_limits"`   // views whose limit (the coordinator's) differed from this isolate's configuration, which the isolate then used
	ReportedAgain   int64 `msgpack:"reported_again"`   // cost a batch in flight reported in a window a clock step then moved it from, reported again in the window it moved to (counted twice, on the denying side)
}

var statNames = [...]string{"keys", "decisions", "denials", "evictions", "evicted_unsynced",
	"state_bytes", "batches", "replies", "clock_backwards", "errors", "unsynced_cost",
	"upstream_ignored", "upstream_pauses", "circuit_opens", "foreign_limits", "reported_again"}

func (s *Stats) fields() [16]*int64 {
	return [16]*int64{&s.Keys, &s.Decisions, &s.Denials, &s.Evictions, &s.EvictedUnsynced,
		&s.StateBytes, &s.Batches, &s.Replies, &s.ClockBackwards, &s.Errors, &s.UnsyncedCost,
		&s.UpstreamIgnored, &s.UpstreamPauses, &s.CircuitOpens, &s.ForeignLimits, &s.ReportedAgain}
}

// AppendMsg appends s as a msgpack map of named counters.
func (s *Stats) AppendMsg(b []byte) []byte {
	f := s.fields()
	b = AppendMapHeader(b, len(f))
	for i, p := range f {
		b = AppendString(b, statNames[i])
		b = AppendInt(b, *p)
	}
	return b
}

// UnmarshalMsg decodes stats.
func (s *Stats) UnmarshalMsg(src []byte) error {
	*s = Stats{}
	f := s.fields()
	r := NewReader(src)
outer:
	for n := r.ReadMapHeader(); n > 0 && r.err == nil; n-- {
		name := string(r.ReadStringBytes())
		for i := range statNames {
			if statNames[i] == name {
				*f[i] = r.ReadInt()
				continue outer
			}
		}
		r.Skip()
	}
	return r.Done()
}
