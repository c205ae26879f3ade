package sim

// Budget stranded in leases. A lease (or a standing lease) reserves budget
// of a window for one isolate; what the isolate does not use before the
// window ends is lost to the others. The simulator measures it where it
// hurts: per key-window, min(denied cost, unused reserved budget at the
// window's end), where the unused reserved budget is what the coordinator
// had counted plus reserved in leases for the window (merge.Merger.
// Reserved), less the cost truly admitted in it (a lease also holds cost
// admitted and not yet reported), capped at the window's unserved demand
// (flush): it is the part of it the limiter refused while the budget sat
// in leases. (The coordinator can count more than the room: with more than
// 256 isolates on a key it charges reclaimed lease entries as spent,
// coordinator/merge/reclaim.go.) Modes without leases, buckets, and
// strategies without a coordinator strand nothing.

// scheduleWindowEnd arranges for window w of key gid to be sampled just
// before it ends, when the strategy has a coordinator and the key is
// windowed.
func (e *engine) scheduleWindowEnd(gid int32, w int64) {
	if e.coord == nil || e.cfg.Limiters[e.keys[gid].lim].IsBucket() {
		return
	}
	end := (w+1)*e.keys[gid].period - 1
	if end < e.duration {
		e.heap.push(event{t: end, tok: uint64(gid), kind: evWindowEnd})
	}
}

// sampleWindowEnd records what the coordinator has counted or reserved for
// key gid's current window (truth.spent) at now (virtual ns).
func (e *engine) sampleWindowEnd(gid int32, now int64) {
	if e.coord == nil {
		return
	}
	k := &e.keys[gid]
	count, reserved, ok := e.coord.m.Reserved(e.cfg.Limiters[k.lim].Name, k.name, e.truth[gid].win, now)
	if ok {
		e.truth[gid].spent = count + reserved
	}
}
