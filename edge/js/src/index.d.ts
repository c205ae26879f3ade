// Type declarations of the edgelimit JavaScript package (src/index.js).

/** One limiter, as in the coordinator's JSON config file. */
export interface LimiterConfig {
  name: string;
  algorithm: 'fixed_window' | 'sliding_window' | 'token_bucket' | 'gcra';
  /** Admitted cost per period, >= 1. */
  limit: number;
  /** A duration: "1s", "15m", "720h", "1d" (days first: "1d12h"). Or give period_ns. */
  period?: string;
  /** The period in ns, instead of period. */
  period_ns?: number | bigint;
  /** token_bucket / gcra capacity; 0 or absent means the limit. */
  burst?: number;
  /**
   * "auto" (the default when absent or empty): leases from the coordinator,
   * as "strict", when a coordinator is set; "approximate" when the isolate
   * never syncs. "strict": only within leases, never over. "approximate":
   * decide from the cached view and an estimate of the others' traffic.
   */
  mode?: '' | 'auto' | 'approximate' | 'strict';
  /** Approximate mode: a cold key is denied with syncRetry, so limit() syncs and decides again. */
  read_through?: boolean;
  /** Per-key limits. */
  overrides?: Record<string, number> | Array<[string, number]>;
  /** What a stale isolate does (default: the create() option failPolicy). */
  fail_policy?: FailPolicy;
  /** How the limiter follows its upstream's answers (observe()); absent: the defaults. */
  upstream?: UpstreamConfig;
}

/** How a limiter follows what its upstream answers (see observe()). */
export interface UpstreamConfig {
  /** Longest pause honoured, a Go duration; default max(1h, period). */
  max_pause?: string;
  /** Highest limit an announced quota may set; default the configured limit. */
  max_limit?: number;
  /** Consecutive failures that open the key's circuit; default 5, -1 off. */
  circuit_failures?: number;
  /** First open time of the circuit, a Go duration; default "1s", doubling per failed probe. */
  circuit_open?: string;
  /** When an announced limit becomes the key's limit: default only for answers without remaining/reset. */
  follow?: '' | 'always' | 'never';
}

/** What observe() returns: the key's upstream state after the answer. */
export interface Observed {
  /** The key is paused for this long (0: not paused). */
  pausedMs: number;
  circuit: 'closed' | 'open' | 'half-open';
  /** The key's limit now (the configured one unless a quota was announced). */
  limit: number;
  /** Why header values were ignored ("; "-separated), empty when none. */
  ignored: string;
}

/** What the upstream answered, for observe(). */
export interface ObserveOptions {
  limiter?: string | number;
  key: string;
  /** A fetch Response (its status and headers are read). */
  response?: { status: number; headers: Headers | Map<string, string> | Array<[string, string]> | Record<string, string> };
  /** Without response: the status (0: no answer came) and headers. */
  status?: number;
  headers?: Headers | Map<string, string> | Array<[string, string]> | Record<string, string>;
}

export interface Config {
  limiters: LimiterConfig[];
  /** Cap on the keys one isolate tracks; 0 or absent means 100,000. */
  max_keys?: number;
  /** The coordinator's own settings of the shared file (listen, tokens...): accepted, not used by the package. */
  coordinator?: Record<string, unknown>;
}

export type FailPolicy = 'open' | 'closed' | 'local-share';

/** Workers' ExecutionContext, or anything with waitUntil. */
export interface WaitUntil {
  waitUntil(promise: Promise<unknown>): void;
}

export interface EdgeLimitOptions {
  /**
   * The module: a WebAssembly.Module (Workers: `import wasm from
   * 'edgelimit/edgelimit.wasm'`; Node: `await loadWasm()` from
   * 'edgelimit/node') or its bytes (Node).
   */
  wasm: WebAssembly.Module | BufferSource;
  /** The limiters: the coordinator's config file as an object or JSON text. */
  config: Config | string;
  /**
   * The coordinator's base URL ("https://limits.example.com"), or several
   * coordinators sharing one store (`edgelimit coordinator --store
   * redis://...`) to fail over between: the isolate prefers the one its
   * id hashes to (so isolates spread over the list), a batch one cannot
   * take (unreachable, timed out, 502, 503, 504) goes to the next at
   * once, and the isolate returns to its own once it answers again
   * (tried 5 s after leaving it, then twice as long each failed try, at
   * most 40 s).
   * Absent: this isolate decides alone (then a strict or read-through
   * limiter is refused: it would deny every request). A URL with a user
   * or password is refused (fetch refuses it), and a coordinator's
   * redirect is not followed.
   */
  coordinator?: string | string[];
  /** Bearer token for the coordinator: visible ASCII (0x21-0x7e), at most 4096 characters. */
  token?: string;
  /** Time between regular syncs, ms. Default 100. */
  syncInterval?: number;
  /**
   * A sync attempt's timeout, ms. Default 5000. A sync still in flight
   * this long after it began (per coordinator listed, plus 100 ms) is
   * abandoned (counters.abandoned): the runtime cancelled it (a Worker
   * request that ended without ctx.waitUntil) or it hangs; a new one may
   * start and the old one's late end, if any, is ignored.
   */
  syncTimeout?: number;
  /**
   * How long limit() waits for replies after a syncRetry denial (a lease
   * to renew, a cold read-through key), ms, deciding again after each (up
   * to three; a batch in flight is amended with the request's ask).
   * Default 1000; negative: never. If a sync fails, the fail policy
   * decides at once.
   */
  retryWait?: number;
  /**
   * While syncs fail, the view turns stale (the fail policies apply) this
   * long after the last good sync, ms. Default 3 sync intervals (300). An
   * isolate that was only idle (a Worker without requests) is never
   * stale: its next request syncs once and is decided on a fresh view.
   * A sync in flight counts as failing after 1000 ms (SLOW_ATTEMPT_MS), or
   * staleAfter if longer: a slow coordinator is not a failing one.
   */
  staleAfter?: number;
  /**
   * While syncs fail, a request probes the coordinator past the backoff at
   * most this often, ms: decisions are fresh again within about this long
   * (plus a round trip) of the coordinator answering again. Also the most
   * retryAfterMs of a denial on a stale view or for want of a lease.
   * Default 500; negative: no probes (only the backoff retries).
   */
  probeInterval?: number;
  /** Cap of the backoff after failed syncs, ms. Default 30000. */
  backoffMax?: number;
  /** Jitter of the sync interval, a fraction in [0, 1). Default 0.1. */
  jitter?: number;
  /** Fail policy of limiters whose config names none. Default "open". */
  failPolicy?: FailPolicy;
  /** Isolates in the fleet sharing the limits: local-share admits limit/shareIsolates per window per key. Default 1. */
  shareIsolates?: number;
  /** This isolate's id in sync batches. Default "js-" and 12 random hex digits (must be unique per instance). */
  isolateId?: string;
  /** fetch used for syncs (e.g. a service binding's fetch). Default the global fetch. */
  fetch?: typeof fetch;
  /** The isolate's own clock in ms since the epoch. Default Date.now; with a coordinator a steady clock (the wall time at creation plus performance.now() since, catching up when the wall clock is set forward by more than 1 s; a system clock set back does not move it). With a coordinator the isolate runs on the coordinator's time: this clock plus the offset its answers tell (Edgelimit-Time), moved when they differ by more than 50 ms plus half a round trip (counters.clockSteps). */
  clock?: () => number;
  /** How background syncs run: "timers" (Node; default outside Workers) or "requests" (on decisions, through ctx.waitUntil; default in Workers). */
  background?: 'timers' | 'requests';
  /** Called with every failed sync's error. */
  onError?: (err: EdgeLimitError) => void;
}

export interface Check {
  /** Limiter name (or index). Default the first limiter. */
  limiter?: string | number;
  /** 1-256 bytes. */
  key: string | Uint8Array;
  /** 0 (peek) to 2^40. Default 1. */
  cost?: number;
}

/**
 * One check (limiter, key, cost), or several limiters checked together,
 * all or nothing (checks, up to 8), instead of limiter/key/cost.
 */
export type LimitOptions = (Check & { checks?: undefined }) | { checks: Check[]; limiter?: undefined; key?: undefined; cost?: undefined };

export interface LimitResult {
  success: boolean;
  /** The binding limiter's limit for the key. */
  limit: number;
  /** Cost still admissible now. */
  remaining: number;
  /** When the window ends or the bucket is full, ms since the epoch. */
  reset: number;
  /** ms until the same request could pass; 0 when allowed; -1 never (cost above the limit). */
  retryAfterMs: number;
  /** The binding limiter's name. */
  limiter: string;
  /** Denied only for want of a lease or a fresh view; limit() already waited for one sync. */
  syncRetry: boolean;
  /** Decided on a stale view (the fail policy applied). */
  stale: boolean;
  /** The binding limiter's fail policy when stale, else null. */
  policy: FailPolicy | null;
}

export type WaitOptions = LimitOptions & {
  /** Give up when no slot comes within this many ms. Default 10000. */
  maxWaitMs?: number;
  /** Least sleep between tries, ms. Default 1. */
  minSleepMs?: number;
  signal?: AbortSignal;
};

export interface WaitResult extends LimitResult {
  waitedMs: number;
}

export interface Stats {
  keys: number; decisions: number; denials: number; evictions: number; evicted_unsynced: number;
  state_bytes: number; batches: number; replies: number; clock_backwards: number; errors: number;
  unsynced_cost: number; upstream_ignored: number; upstream_pauses: number; circuit_opens: number; foreign_limits: number;
  /** Cost a batch in flight carried that a clock step moved to another window, reported again there (counted twice, on the denying side). */
  reported_again: number;
  syncs: number; syncErrors: number; reincarnations: number; policyDenials: number; restarts: number; failovers: number; abandoned: number; amendments: number; clockSteps: number; recalls: number;
  isolateId: string; memoryBytes: number; lastSyncAgeMs: number | null; stale: boolean; failures: number;
}

/**
 * The code of an EdgeLimitError (ERROR_CODES says what each means; the
 * README's "Errors" table lists them).
 */
export type ErrorCode =
  | 'bad_options' | 'bad_config' | 'bad_module' | 'version_mismatch' | 'bad_input' | 'bad_key' | 'bad_cost'
  | 'bad_checks' | 'unknown_limiter' | 'bad_time' | 'trap' | 'rate_limited' | 'closed' | 'aborted' | 'sync'
  | 'sync_refused' | 'sync_timeout' | 'sync_abandoned' | 'sync_reply' | 'internal';

/** Every ErrorCode with what it means. */
export const ERROR_CODES: Readonly<Record<ErrorCode, string>>;

/** Every error the package throws or rejects with (the caller's own callbacks' errors pass through). */
export class EdgeLimitError extends Error {
  constructor(message: string, code: ErrorCode, options?: { cause?: unknown });
  code: ErrorCode;
  /** schedule()'s last decision when code is "rate_limited". */
  result?: WaitResult;
  /** The coordinator's HTTP status when code is "sync_refused". */
  status?: number;
}

/** The package's version; its major is PROTOCOL_VERSION. */
export const VERSION: string;

/** The wire protocol version the package, its module and the coordinator speak. */
export const PROTOCOL_VERSION: number;

export class EdgeLimit {
  /** Creates a limiter; the module is instantiated at the first decision (or ready()). */
  static create(opts: EdgeLimitOptions): Promise<EdgeLimit>;
  constructor(opts: EdgeLimitOptions);
  /** The isolate id in sync batches (changes when the coordinator asks for a new incarnation). */
  readonly isolateId: string | undefined;
  /**
   * failovers: times a sync moved on to the next coordinator of the list;
   * amendments: batches in flight resent with the asks of requests held
   * since they were cut (limit() then waits one round trip, not two);
   * clockSteps: times the isolate's offset to the coordinator's time moved;
   * recalls: batches the coordinator refused for their times (400
   * clock_skew: cut on a clock that then stepped back) taken back and cut
   * again at once at the coordinator's time.
   */
  readonly counters: { syncs: number; syncErrors: number; reincarnations: number; policyDenials: number; restarts: number; failovers: number; abandoned: number; amendments: number; clockSteps: number; recalls: number };
  /** The last failed sync's error. */
  readonly lastError: EdgeLimitError | null;
  /** Instantiates and configures the module now. */
  ready(): this;
  /** Decides now, without waiting for a sync. */
  decide(opts: LimitOptions, ctx?: WaitUntil): LimitResult;
  /** Decides; after a syncRetry denial waits (up to retryWait) for a sync's reply (amending a batch in flight) and decides again. */
  limit(opts: LimitOptions, ctx?: WaitUntil): Promise<LimitResult>;
  /** Waits for a slot instead of failing. */
  wait(opts: WaitOptions, ctx?: WaitUntil): Promise<WaitResult>;
  /** Runs fn once a slot is free; rejects with code "rate_limited" when none came within maxWaitMs. */
  schedule<T>(opts: WaitOptions, fn: () => T | Promise<T>, ctx?: WaitUntil): Promise<Awaited<T>>;
  /** Sends what the module has to sync of the decisions so far (after any sync in flight; a strict or auto fixed-window key's cost admitted within its lease is reported lazily, and by close()); true when the reply was applied or there was nothing to send. */
  sync(): Promise<boolean>;
  /**
   * Tells the limiter what the upstream answered: a 429 pauses the key here
   * at once and in every isolate after the next sync; quota headers and
   * failures (the key's circuit) are read too.
   */
  observe(opts: ObserveOptions, ctx?: WaitUntil): Observed;
  /** Forgets this isolate's local state of a key. */
  reset(opts: { limiter?: string | number; key: string | Uint8Array }): void;
  stats(): Stats;
  /**
   * A graceful stop: decides nothing new (decide() and limit() throw code
   * "closed"), lets the requests limit() holds finish, then reports what
   * the isolate admitted and gives its leases back. Resolves to true when
   * the coordinator took the last batch.
   */
  close(): Promise<boolean>;
}

/** Parses a Go duration ("1s", "1m30s", "250ms") into ns. */
export function parseDuration(s: string): bigint;

export default EdgeLimit;
