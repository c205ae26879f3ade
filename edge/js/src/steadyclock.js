// A wall clock that never steps back (the Go host's clock.Steady): the
// wall time when it was made plus the monotonic time since
// (performance.now()), moved forward when the wall clock runs more than
// STEADY_CATCH_UP_MS ahead of it (a process started before its clock was
// set, then set forward). A system clock set back does not move it. An
// isolate with a coordinator runs on it under the coordinator's offset,
// which takes up its drift from the wall clock at the next answer, so the
// only steps back its module sees are the offset's, which it is told of
// (Module.clockOffset): a step back it is not told of could leave a lease
// alive past the coordinator's record of it.

/** How far (ms) the wall clock may run ahead before a steady clock catches up: 1 s. */
export const STEADY_CATCH_UP_MS = 1000;

/**
 * Returns a steady clock (ms since the epoch). mono and wall are the
 * monotonic and wall clocks (ms); without a monotonic clock it is wall.
 */
export function steadyClock(mono = globalThis.performance?.now?.bind(globalThis.performance), wall = Date.now) {
  if (typeof mono !== 'function') return wall;
  const base = wall() - mono();
  let ahead = 0;
  let checked = -Infinity; // mono() of the last look at the wall clock
  return () => {
    const m = mono();
    const n = base + m + ahead;
    // The wall clock is read at most once per STEADY_CATCH_UP_MS (each
    // read costs as much as the monotonic one: ~40 ns in Node 20).
    if (m - checked < STEADY_CATCH_UP_MS) return n;
    checked = m;
    const w = wall();
    if (w - n > STEADY_CATCH_UP_MS) {
      ahead += w - n;
      return w;
    }
    return n;
  };
}
