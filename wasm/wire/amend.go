package wire

// Amendments. An isolate keeps one batch in flight. A request that needs a
// lease while it is (a strict key with no lease left) would wait for that
// batch's reply and then for its own batch's: two round trips. Instead the
// isolate amends the batch in flight: it resends it, the same Seq, time and
// entries, with Batch.Asks, the cost of the requests it holds since the
// batch was cut, and takes the amendment's reply in place of the first
// one's (the host drops the first attempt's reply).
//
// The coordinator treats the asks as demand of the batch: when the batch
// was not applied yet (the amendment overtook it, or it was lost), the
// asks are the batch's unmet demand; when it was (the amendment is a retry
// of the last applied batch), what is free of the window (neither counted
// nor reserved) is added to the isolate's lease, up to the asks. Either
// way the reply's lease is, like any reply's, what the isolate may admit
// from the batch's cut on, so the isolate applies whichever reply of the
// batch it takes, and a request waits one round trip from the moment it
// was held.

// Ask is the cost one key's requests asked for in one window (an
// amendment's, Batch.Asks).
type Ask = KeyCost
