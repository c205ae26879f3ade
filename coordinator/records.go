package coordinator

import (
	"fmt"
	"time"
)

// Key records the merge could not use as stored: corrupt ones, started
// again, and ones written under another period of their limiter, fitted
// to it (merge.MergeStats.CorruptRecords, RecordsRefit; the metrics
// records_corrupt_total and records_refit_total). Each kind is logged when
// its count grows, at most once a minute, with the count: after a period
// changed, every key of the limiter is refit as it is next read.

// recordsLogEvery is how often each kind of line may be logged: a minute.
const recordsLogEvery = time.Minute

// recordNotes is what noteRecords logged last.
type recordNotes struct {
	corrupt, refit     int64 // counts logged
	corruptAt, refitAt int64 // when, ns
}

// noteRecords logs the growth of the merge's corrupt and refit record
// counts. c.mu is held.
func (c *Coordinator) noteRecords() {
	st := c.m.Stats()
	n, now := &c.recNotes, c.opts.Clock.Now()
	if st.CorruptRecords > n.corrupt && (n.corruptAt == 0 || now-n.corruptAt >= int64(recordsLogEvery)) {
		c.log.Error(fmt.Sprintf("coordinator: %d key records could not be read and started again, their counts lost (%d since start): a damaged store?",
			st.CorruptRecords-n.corrupt, st.CorruptRecords), "records_corrupt_total", st.CorruptRecords)
		n.corrupt, n.corruptAt = st.CorruptRecords, now
	}
	if st.RecordsRefit > n.refit && (n.refitAt == 0 || now-n.refitAt >= int64(recordsLogEvery)) {
		c.log.Warn(fmt.Sprintf("coordinator: %d key records were written under another period of their limiter and start again in the configured one (%d since start)",
			st.RecordsRefit-n.refit, st.RecordsRefit), "records_refit_total", st.RecordsRefit)
		n.refit, n.refitAt = st.RecordsRefit, now
	}
}
