package wire

// Amendments. An isolate keeps one batch in flight. A request that needs a
// lease while it is (a strict key with no lease left) would wait for that
// batch's reply and then for its own batch's: two round trips. Instead the
// isolate amends the batch in flight: it resends it, the same Seq, time and
// entries, with Batch.Asks: for each key whose requests it holds, the cost
// it needs in the window from the batch's cut on (what it admitted since
// the cut plus what it holds). It takes the replies of both attempts.
//
// The coordinator: when the batch was applied (the amendment is a retry of
// it), the isolate's lease, which is what it may admit from the cut on, is
// raised to the ask as far as the window has budget free (neither counted
// nor reserved). An ask is a total, not an increment: resent, or arriving
// after a later one, it asks for nothing more. When the batch was not
// applied (the amendment overtook it, or it was lost), the amendment is
// applied as the batch, and its asks served after that. Either way the
// reply's lease is, like any reply's, what the isolate may admit from the
// batch's cut on, so the isolate applies the replies of both attempts
// (the module takes a second reply to its last batch until it cuts the
// next, and an amendment's reply while the next batch is in flight, less
// what that batch reports; core.Core.SyncIn), and a held request waits
// one round trip from the moment it was held. An amendment that reaches
// the coordinator after the next batch is refused as stale (409), which
// the host ignores.

// Ask is the cost one key's requests asked for in one window (an
// amendment's, Batch.Asks).
type Ask = KeyCost
