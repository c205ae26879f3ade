// Node helpers (import from 'edgelimit/node'): the module the package
// ships (edgelimit.wasm, beside package.json), compiled. Workers import
// the module instead (import wasm from 'edgelimit/edgelimit.wasm'): they
// may not read files or compile Wasm at run time.

import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { EdgeLimitError } from './errors.js';

/** Path of the module the package ships. */
export const wasmPath = fileURLToPath(new URL('../edgelimit.wasm', import.meta.url));

let compiled = null;

/**
 * Resolves to the package's module as a WebAssembly.Module, compiled once
 * per process: pass it as the wasm option of EdgeLimit.create.
 */
export function loadWasm() {
  compiled ??= readFile(wasmPath).then((b) => WebAssembly.compile(b), (e) => {
    compiled = null;
    throw new EdgeLimitError(`the package's module is missing at ${wasmPath} (${e.code ?? e.message}); ` +
      'in a checkout of the repository run `npm run prepack` in edge/js', 'bad_module', { cause: e });
  });
  return compiled;
}
