// What a held request that no attempt in flight asks for does: the same
// rule as the Go edge host's and the simulator's (edge/syncloop/amend.go,
// NextAsk). A held request waits for the reply of an attempt that asks for
// it: the batch in flight when it was cut after the request was held, or
// the amendment the request sent. One that none asks for (held while the
// batch's amendments were all on their way, or decided syncRetry again
// after the reply to its own ask) asks at once: in an amendment of the
// batch in flight, up to MAX_AMENDS of it, else in the next batch, cut
// while at most one amendment of the last batch is on its way (the module
// takes one amendment's reply after the next cut and refuses another's).

/** Amendments of one batch in flight at most (syncloop.MaxAmends). */
export const MAX_AMENDS = 2;

export const ASK_WAIT = 0; // wait for a reply
export const ASK_AMEND = 1; // amend the batch in flight
export const ASK_BATCH = 2; // cut the next batch now

/**
 * @param {boolean} inFlight a batch is in flight
 * @param {number} amends amendments of the last batch (the one in flight, or the one answered last) on their way
 * @returns {number} ASK_WAIT, ASK_AMEND or ASK_BATCH
 */
export function nextAsk(inFlight, amends) {
  if (inFlight) return amends < MAX_AMENDS ? ASK_AMEND : ASK_WAIT;
  return amends <= 1 ? ASK_BATCH : ASK_WAIT;
}
