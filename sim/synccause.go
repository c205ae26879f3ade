package sim

// SyncCauses counts the batches an edge strategy's isolates sent (attempts,
// resends included) by what started them. A batch an early request asked
// for but the minimum spacing put off (syncloop.Scheduler.Want) counts
// under that request's cause when its timer fires. Amendments
// (Result.Amendments) are not batches and are counted apart.
type SyncCauses struct {
	// Regular: the sync interval's timer found something to report (an
	// idle tick sends nothing and is not counted).
	Regular int64 `json:"regular"`
	// Early: the module asked for a sync (Decision.SyncWanted: a lease
	// half spent or gone, an approximate key near its limit, an upstream
	// signal).
	Early int64 `json:"early"`
	// Held: a request held for a lease (SyncRetry) that no attempt in
	// flight asked for cut the next batch (syncloop.NextAsk).
	Held int64 `json:"held"`
	// Retries: the attempt after a failed one (timeout, loss, refusal),
	// on the backoff's timer.
	Retries int64 `json:"retries"`
}

// syncCause is what a node's next batch is started by.
type syncCause uint8

const (
	causeRegular syncCause = iota
	causeEarly
	causeHeld
	causeRetry
)

// count adds one batch started by c.
func (sc *SyncCauses) count(c syncCause) {
	switch c {
	case causeEarly:
		sc.Early++
	case causeHeld:
		sc.Held++
	case causeRetry:
		sc.Retries++
	default:
		sc.Regular++
	}
}

// SyncCausesPct is the sync requests of a run by cause, % of its
// decisions (a corpus row: the mean over seeds). They sum to the row's
// sync/dec % for edgelimit's strategies.
type SyncCausesPct struct {
	Regular    float64 `json:"regular"`
	Early      float64 `json:"early"`
	Held       float64 `json:"held"`
	Retries    float64 `json:"retries"`
	Amendments float64 `json:"amendments"`
}

// add adds r's causes, % of its decisions, weighted by w.
func (p *SyncCausesPct) add(r *Result, w float64) {
	if r.Requests == 0 {
		return
	}
	pct := func(n int64) float64 { return 100 * float64(n) / float64(r.Requests) * w }
	p.Regular += pct(r.SyncCauses.Regular)
	p.Early += pct(r.SyncCauses.Early)
	p.Held += pct(r.SyncCauses.Held)
	p.Retries += pct(r.SyncCauses.Retries)
	p.Amendments += pct(r.Amendments)
}
