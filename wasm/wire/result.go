package wire

// Result is the outcome of a decision, the one decision type of the
// system: the core returns it (core.Result), the scalar ABI carries it
// (package abi) and the Go host hands it out (isolate.Decision); Decision
// is its msgpack form for the Extism-style export, with the limiter's name.
// For several limiters checked together it describes the binding one.
type Result struct {
	Allowed    bool
	SyncWanted bool // the isolate asks for an early sync
	// SyncRetry: strict mode denied only because this isolate's lease is
	// missing or too small while the global view has room (or a
	// read-through key is cold). A host that can afford one round trip
	// may sync and decide again after the reply instead of denying.
	SyncRetry  bool
	Limiter    int   // index of the binding limiter
	Limit      int64 // limit of the binding limiter for the key
	Remaining  int64 // cost still admissible now
	Reset      int64 // ns time the window ends or the bucket is full
	RetryAfter int64 // ns until the request could pass; 0 when allowed, -1 never (cost above the limit)
}

// DecisionOf returns r's msgpack form, naming the binding limiter.
func DecisionOf(r *Result, limiter string) Decision {
	return Decision{Allowed: r.Allowed, Limit: r.Limit, Remaining: r.Remaining, Reset: r.Reset,
		RetryAfter: r.RetryAfter, SyncWanted: r.SyncWanted, SyncRetry: r.SyncRetry, Limiter: limiter}
}
