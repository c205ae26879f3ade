// The package's one error type and its codes. Every error the package
// throws or rejects with is an EdgeLimitError whose code is one of
// ERROR_CODES (the README's table is this list); errors of the caller's
// own callbacks (schedule()'s fn, onError) pass through untouched.

/** Every code an EdgeLimitError may carry, with what it means. */
export const ERROR_CODES = Object.freeze({
  bad_options: 'an option of create() is unknown, of the wrong type or out of range (the message names it)',
  bad_config: 'the limiters\' configuration is invalid: not JSON, an unknown field, a wrong type or value (the message names the field\'s path)',
  bad_module: 'the wasm option is not the edgelimit module (not a WebAssembly.Module or its bytes, or an export is missing)',
  version_mismatch: 'the module or the coordinator speaks another protocol version than this package (the message names both)',
  bad_input: 'a call\'s argument is missing or malformed (no options object, a bad status for observe(), a bad maxWaitMs)',
  bad_key: 'a key is not a string or Uint8Array, or is not 1 to 256 bytes (UTF-8)',
  bad_cost: 'a cost is not an integer from 0 to 2^40',
  bad_checks: 'checks is not an array of 1 to 8 {limiter, key, cost}',
  unknown_limiter: 'no limiter of that name (or index) in the configuration',
  bad_time: 'the clock option gave a time before the epoch, or not a finite number',
  trap: 'the module trapped; the isolate restarts under a new id and loses what it had not synced',
  rate_limited: 'schedule() found no slot within maxWaitMs (.result is the last decision)',
  closed: 'the limiter was closed (close()): it decides nothing more',
  aborted: 'wait() or schedule() stopped because its signal aborted (.cause is the signal\'s reason)',
  sync: 'a sync could not reach the coordinator (the message names the URL and the cause)',
  sync_refused: 'the coordinator answered a sync with an error status (the message has its status and problem)',
  sync_timeout: 'a sync attempt took longer than syncTimeout',
  sync_abandoned: 'a sync still in flight past its deadline was abandoned (a Worker request without ctx, or a hang)',
  sync_reply: 'the module refused the coordinator\'s reply (it does not answer the batch sent, or is malformed)',
  internal: 'the module reported an unexpected state (a bug: please report it with the message)',
});

/** An error of the edgelimit package; code is one of ERROR_CODES. */
export class EdgeLimitError extends Error {
  /**
   * @param {string} message what went wrong (prefixed with "edgelimit: ")
   * @param {keyof typeof ERROR_CODES} code
   * @param {{cause?: unknown}} [options]
   */
  constructor(message, code, options) {
    super(`edgelimit: ${message}`, options);
    this.name = 'EdgeLimitError';
    this.code = ERROR_CODES[code] === undefined ? 'internal' : code;
  }
}

/** Error messages of the module's negative status codes (wasm/core/errors.go), by -code. */
export const CODES = [
  null,
  'module is not configured',
  'unknown limiter',
  'key longer than 256 bytes',
  'empty key',
  'cost must be between 0 and 2^40',
  'time must be >= 0 ns',
  'a decision checks 1 to 8 limiters',
  'reply does not answer the outstanding batch',
  'sync needs an isolate id in the config',
  'malformed input',
];

// The EdgeLimitError code of each of the module's status codes, by -code.
const MODULE_CODES = [null, 'internal', 'unknown_limiter', 'bad_key', 'bad_key', 'bad_cost', 'bad_time',
  'bad_checks', 'sync_reply', 'internal', 'internal'];

/**
 * Returns the EdgeLimitError for the module's negative status code c of
 * operation op. A malformed input of sync in is a reply the module refused
 * (sync_reply); elsewhere it is this package's fault (internal).
 */
export function codeError(op, c) {
  const msg = CODES[-c] ?? `status ${c}`;
  const code = op === 'sync in' && c === -10 ? 'sync_reply' : (MODULE_CODES[-c] ?? 'internal');
  return new EdgeLimitError(`${op}: ${msg}`, code);
}
