// Declares `import wasm from 'edgelimit/edgelimit.wasm'`: the package's
// module, compiled by the bundler (wrangler, esbuild with the Workers
// loader) into a WebAssembly.Module, as Workers import Wasm.
declare const wasm: WebAssembly.Module;
export default wasm;
