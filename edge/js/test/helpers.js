import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { decode } from '../src/msgpack.js';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
export const wasmPath = path.join(root, 'wasm/edgelimit.wasm');
export const wasmBytes = readFileSync(wasmPath);
export const wasmModule = new WebAssembly.Module(wasmBytes);

/**
 * A fetch's answer that never comes (a coordinator stopped with SIGSTOP, a
 * partition that drops packets silently): it ends only when init's signal
 * aborts it.
 */
export const hangUntilAborted = (init) => new Promise((_, reject) => init.signal.addEventListener('abort', () => reject(init.signal.reason)));

/** A clock the test moves by hand (ms). */
export function fakeClock(start = 1_800_000_000_000) {
  const c = () => c.now;
  c.now = start;
  return c;
}

// Waits until the real clock is 100-800 ms into its second. A lease asked
// for at the very end of a window reaches the coordinator in the next one,
// which then grants nothing, and the isolate denies for a dry spell (a
// known race of the lease logic in wasm/core and coordinator/apply.go,
// left to its owners): tests of idle isolates keep requests off the
// boundary of 1 s windows.
export async function offBoundary() {
  const r = Date.now() % 1000;
  if (r < 100 || r > 800) await new Promise((res) => setTimeout(res, (1150 - r) % 1000));
}

// Waits until the real clock is 0.5-4 s into a 10 s window, so that a test
// of a few seconds stays in one 10 s window of the coordinator.
export async function earlyInWindow() {
  const r = Date.now() % 10_000;
  if (r < 500 || r > 4000) await new Promise((res) => setTimeout(res, (10_600 - r) % 10_000));
}

// A coordinator's problem answer (application/problem+json) of status and type.
export const problem = (status, type) => new Response(JSON.stringify({ type, title: 'test', status, detail: 'test' }),
  { status, headers: { 'content-type': 'application/problem+json' } });

// Two limiters of 1,000 an hour, approximate ('a') and strict ('s').
export const hourConfig = { limiters: [
  { name: 'a', algorithm: 'fixed_window', limit: 1000, period: '1h', mode: 'approximate' },
  { name: 's', algorithm: 'fixed_window', limit: 1000, period: '1h', mode: 'strict' }] };

// A fetch for EdgeLimit.create that records every POST in posts ({seq, ak
// (an amendment), iso, at}) and lets step(n) answer the n-th (from 0): a
// Response, or nothing to forward it (once what step awaited is done).
export function scriptedFetch(posts, step) {
  return async (url, init) => {
    if (!init?.body) return fetch(url, init);
    const b = decode(init.body);
    const n = posts.length;
    posts.push({ seq: b.seq, ak: b.ak !== undefined, iso: b.iso, at: Date.now() });
    return (await step(n)) ?? fetch(url, init);
  };
}
