// How many replies a request held by limit() (syncRetry) waits for: the
// same rule as the Go edge host's and the simulator's (edge/syncloop/retry.go,
// Retry), in milliseconds. A held request is decided again after each reply
// it waits for, up to REPLIES of them (the first may answer a batch cut
// before it asked), and one more, once, when it is decided in a later
// window than its last decision's: held near a window's end, it asked for
// that window, and the reply to that ask, which comes in the next window,
// cannot admit it there.

/** Replies a held request waits for (syncloop.DefaultRetryReplies plus the amendment's: 3). */
export const REPLIES = 3;

export class Retry {
  /** @param {number} [replies] default REPLIES */
  constructor(replies = REPLIES) {
    this._left = replies;
    this._reset = 0; // end of the window of its last decision (ms); 0: none
    this._moved = false; // newWindow gave its reply
  }

  /** Records a reply the request waited for (a batch's second reply, which answers the same demand, is not one). */
  replied() {
    this._left--;
  }

  /** @returns {boolean} the request, decided again and held once more, waits for another reply */
  again() {
    return this._left > 0;
  }

  /**
   * Records the reset (ms) of a decision of the request made at at: the end
   * of the window it was decided in. A reset not after at (a full bucket: no
   * window ends) is none.
   * @param {number} reset ms
   * @param {number} at ms
   */
  decided(reset, at) {
    this._reset = reset > at ? reset : 0;
  }

  /**
   * Gives the request one more reply, once, when it is decided again at now
   * (ms) after the window of its last decision ended (decided).
   * @param {number} now ms
   */
  newWindow(now) {
    if (!this._moved && this._reset > 0 && now >= this._reset) {
      this._moved = true;
      this._left++;
    }
  }
}
