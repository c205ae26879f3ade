// Copies what the package ships from the repository into edge/js (the
// `prepack` and `pretest` scripts): the module (wasm/edgelimit.wasm, the
// committed build) as edgelimit.wasm, and the license. Neither copy is
// committed; test/package.test.js checks the packed copy is the committed
// module, byte for byte.
import { copyFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const pkg = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const root = path.resolve(pkg, '../..');
for (const [from, to] of [['wasm/edgelimit.wasm', 'edgelimit.wasm'], ['LICENSE', 'LICENSE']]) {
  copyFileSync(path.join(root, from), path.join(pkg, to));
}
