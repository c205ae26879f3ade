package failpolicy

// Leased limiters (modes auto and strict) admit only within leases the
// coordinator grants, which an isolate whose syncs fail cannot get: the
// module then denies every request past the lease it holds (a SyncRetry
// answer). Left at that, every policy would deny like Closed. So on a
// stale view the policy decides in the module's place (Leased): Open
// admits within the key's whole limit per window counted on this isolate
// alone (deciding alone, as approximate mode would; what it admitted within
// its lease on the stale view counts too), and LocalShare admits what
// Apply let through (its share). A denial the module makes for another
// reason (the coordinator said the window is spent, an upstream pause)
// stands.

// Alone returns q for an isolate deciding alone: its whole limit per window.
func (q Quota) Alone() Quota { return Quota{Limit: q.Limit, Period: q.Period, Isolates: 1} }

// Leased returns whether policy p admits a request of cost on key of a
// leased limiter at now (ns), on a stale view, given the module's answer:
// allowed (within the lease it holds) or leaseMiss (denied only for want
// of a lease, SyncRetry). Under Open the cost is counted in sh against
// q.Alone() whenever the module admitted or missed a lease; a lease miss
// is admitted when it fits. Under LocalShare a lease miss is admitted
// (Apply took the cost from the share). Closed never gets here (Apply
// denies) and keeps the module's answer.
func Leased[K comparable](p Policy, sh *Share[K], key K, cost int64, q Quota, now int64, allowed, leaseMiss bool) bool {
	switch {
	case allowed && p == Open:
		sh.Take(key, cost, q.Alone(), now)
		return true
	case !leaseMiss || allowed:
		return allowed
	case p == Open:
		return sh.Take(key, cost, q.Alone(), now)
	case p == LocalShare:
		return true
	}
	return false
}
