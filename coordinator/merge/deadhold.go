package merge

// What a killed isolate strands. A lease held by an isolate that dies
// (kill -9, a crashed host) is reserved, as spent, until its window ends:
// the coordinator cannot tell the units it used and never reported from
// the ones it did not use (reservation). In a window no longer than a
// lease's life that costs at most what the isolate could have admitted in
// that life anyway; in a longer one (an hour, a day) it is budget lost for
// the rest of the window. There a busy isolate's lease grew to twice its
// demand per batch: with real processes, a host admitting a 1,000/hour
// strict key as fast as it answered (about 2,000/s over 4 isolates)
// held 62-110 units when it was killed after 600, and a new host reached
// 905-947 of the hour's 1,000.
//
// So in a window longer than the lease's life, what a busy isolate holds
// beyond what it was refused is at most its demand-proportional share of
// deadHoldShare of the limit, or two requests' cost: all the key's
// holders killed at once strand about that share of the limit, or two
// requests each (a floor of one request cost the corpus's rows of
// isolates killed mid-window, at 3 requests a second per isolate over
// windows of 5 and 10 s, 4 and 14 points of waited decisions, for 0.8
// points of utilisation on one of them). Only keys
// whose isolates' demand per sync is a large part of the limit feel it
// (they sync more often, near a window they fill within seconds); a busy
// key of 30,000 per minute at 1,000/s over 16 isolates holds about 12
// units per isolate against a cap of 56. With real processes
// (TestStoppedHostStrandsNoBudget/SIGKILL, four clients at once, about
// 1,900/s): 3-22 stranded in 5 runs, where it was 54 and 55 before.

// deadHoldShare is the share of a key's limit its busy isolates may hold
// ahead, together, in a window longer than a lease's life: 1/32 (3.1%).
const deadHoldShare = 1.0 / 32

// deadHoldCap returns the most an isolate may hold ahead in such a window
// of a key whose limit is limit, its demand (per batch, scaled) of the
// key's sumD, requests costing unit each.
func deadHoldCap(limit, demand, sumD, unit int64) int64 {
	c := int64(float64(limit) * deadHoldShare)
	if sumD > 0 {
		c = mulDiv(c, demand, sumD)
	}
	return max(c, 2*unit)
}
