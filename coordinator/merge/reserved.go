package merge

// Reserved returns, for window index w (time / period) of a windowed
// limiter's key, the cost counted in w and the budget of w reserved in
// leases (the sum over the key's isolates of their lease or standing lease
// for w, cost units). A lease may hold cost its isolate admitted and has
// not reported yet (fixed windows report it lazily), so count + reserved is
// what the window has spent or promised, not what was unused.
//
// It reads only the in-memory state and changes nothing: ok is false when
// the limiter is unknown or a bucket, or the key is not cached (it has not
// been synced since the coordinator started, or was evicted). Like Apply,
// it must not run concurrently with other calls on m.
// now (ns, coordinator time) decides which leases have expired.
func (m *Merger) Reserved(limiter, key string, w, now int64) (count, reserved int64, ok bool) {
	m.refreshLimits()
	lim := m.lims[limiter]
	if lim == nil || lim.IsBucket() {
		return 0, 0, false
	}
	m.buf = appendKeyStorageKey(m.buf[:0], lim.Name, key)
	st, ok := m.keys[string(m.buf)]
	if !ok {
		return 0, 0, false
	}
	count, _ = st.windowCounts(w)
	if lim.Leased() {
		for i := range st.isos {
			reserved = addSat(reserved, st.reservation(&st.isos[i], w, now))
		}
	}
	return count, reserved, true
}
