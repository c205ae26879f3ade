// Declarations of 'edgelimit/node' (src/node.js).

/** Path of the module the package ships (edgelimit.wasm). */
export const wasmPath: string;

/** The package's module, compiled once per process: the wasm option of EdgeLimit.create. */
export function loadWasm(): Promise<WebAssembly.Module>;
