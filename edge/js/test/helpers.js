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
