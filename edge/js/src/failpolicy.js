// The fail policies of a stale isolate (the same as edge/failpolicy):
// open decides from the last view, closed denies, local-share admits up to
// max(limit / shareIsolates, 1) per window of the limiter's period per key
// on this isolate and then asks the module too.

export const OPEN = 'open';
export const CLOSED = 'closed';
export const LOCAL_SHARE = 'local-share';

/** Local-share counts per (limiter, key) and window, bounded by maxKeys. */
export class Share {
  constructor(maxKeys = 100000) {
    this.m = new Map();
    this.max = maxKeys > 0 ? maxKeys : 100000;
    this.nextEnd = Infinity;
  }

  /** Whether cost fits key's share in the window holding now (ms), counting it if so. A cost of 0 always fits. */
  take(key, cost, share, periodMs, now) {
    const w = Math.floor(now / periodMs);
    let u = this.m.get(key);
    if (u === undefined && this.m.size >= this.max && !this.sweep(now)) return false;
    if (u === undefined || u.win !== w) {
      u = { win: w, end: (w + 1) * periodMs, cost: 0 };
      this.nextEnd = Math.min(this.nextEnd, u.end);
      this.m.set(key, u);
    }
    if (u.cost + cost > share) return false;
    u.cost += cost;
    return true;
  }

  /** Gives back cost taken in the window holding now (another check of the request denied). */
  give(key, cost, periodMs, now) {
    const u = this.m.get(key);
    if (u && u.win === Math.floor(now / periodMs)) u.cost = Math.max(u.cost - cost, 0);
  }

  /** What is left of key's share in the window holding now. */
  remaining(key, share, periodMs, now) {
    const u = this.m.get(key);
    if (!u || u.win !== Math.floor(now / periodMs)) return share;
    return Math.max(share - u.cost, 0);
  }

  sweep(now) {
    if (now < this.nextEnd) return false;
    let next = Infinity;
    for (const [k, u] of this.m) {
      if (u.end <= now) this.m.delete(k);
      else next = Math.min(next, u.end);
    }
    this.nextEnd = next;
    return this.m.size < this.max;
  }
}
