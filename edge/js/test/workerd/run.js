// Starts real workerd (npm package "workerd") serving several Workers,
// each a separate service (its own V8 isolate, its own instance of the
// module) on its own loopback port.
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { root } from '../helpers.js';
import { freePort, waitUp } from '../coordinator.js';

const require = createRequire(import.meta.url);

/** Path of the workerd binary from the npm package, or null when not installed. */
export function workerdBin() {
  try {
    const pkg = require.resolve('workerd/package.json');
    const bin = path.join(path.dirname(pkg), 'bin', 'workerd');
    return require('node:fs').existsSync(bin) ? bin : null;
  } catch { return null; }
}

const src = path.join(root, 'edge/js/src');

/**
 * Starts workerd with n services running workerFile (modules: the worker,
 * the package's src/*.js, edgelimit.wasm and its bytes as edgelimit.bin)
 * and bindings (text); or, given bundle (a directory of wrangler's output),
 * that bundle, with wasmModules ({module name: file}) beside it (an
 * esbuild bundle that kept its .wasm imports external). extraServices: [{workerFile, withPackage} or {bundle}]. tls:
 * PEM certificates the Workers' fetch trusts (a coordinator's self-signed
 * one). Resolves to {urls, extraUrls, stop(), output()}.
 */
export async function startWorkerd({ n, workerFile, bundle, wasmModules = {}, bindings = {}, extraServices = [], tls }) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'edgelimit-workerd-'));
  const ports = [];
  for (let i = 0; i < n + extraServices.length; i++) ports.push(await freePort());
  const q = (s) => JSON.stringify(s);
  const rel = (f) => path.relative(dir, f); // embed paths are relative to the config file
  const srcMods = readdirSync(src).filter((f) => f.endsWith('.js'))
    .map((f) => `(name = ${q(`src/${f}`)}, esModule = embed ${q(rel(path.join(src, f)))})`).join(',\n      ');
  // Module names are paths from edge/js, so a worker's relative imports
  // resolve as they do on disk; the module is also served as
  // edgelimit.wasm (and its bytes as edgelimit.bin) beside the worker.
  const worker = (name, file, extra, bundle) => {
    if (bundle) return bundled(name, bundle);
    const modName = path.relative(path.join(root, 'edge/js'), file);
    const dir = path.dirname(modName) === '.' ? '' : `${path.dirname(modName)}/`;
    return `
const ${name} :Workerd.Worker = (
  modules = [
    (name = ${q(modName)}, esModule = embed ${q(rel(file))}),
    ${extra ? `${srcMods},
      (name = ${q(`${dir}edgelimit.wasm`)}, wasm = embed ${q(rel(path.join(root, 'wasm/edgelimit.wasm')))}),
      (name = ${q(`${dir}edgelimit.bin`)}, data = embed ${q(rel(path.join(root, 'wasm/edgelimit.wasm')))}),` : ''}
  ],
  compatibilityDate = "2024-09-23",
  bindings = [${Object.entries({ ...bindings, NAME: name }).map(([k, v]) => `(name = ${q(k)}, text = ${q(String(v))})`).join(', ')}],
  globalOutbound = "loopback",
);`;
  };
  // A bundle (wrangler's --outdir: the entry, worker.js, and the .wasm
  // modules it imports by their file names).
  const bundled = (name, bundle) => {
    const files = readdirSync(bundle).filter((f) => f.endsWith('.js') || f.endsWith('.wasm'));
    files.sort((a, b) => (a === 'worker.js' ? -1 : b === 'worker.js' ? 1 : a < b ? -1 : 1));
    const mods = files.map((f) => `(name = ${q(f)}, ${f.endsWith('.wasm') ? 'wasm' : 'esModule'} = embed ${q(rel(path.join(bundle, f)))})`);
    for (const [m, f] of Object.entries(wasmModules)) mods.push(`(name = ${q(m)}, wasm = embed ${q(rel(f))})`);
    return `
const ${name} :Workerd.Worker = (
  modules = [${mods.join(', ')}],
  compatibilityDate = "2024-09-23",
  bindings = [${Object.entries({ ...bindings, NAME: name }).map(([k, v]) => `(name = ${q(k)}, text = ${q(String(v))})`).join(', ')}],
  globalOutbound = "loopback",
);`;
  };
  const services = [];
  const sockets = [];
  let defs = '';
  for (let i = 0; i < n; i++) {
    services.push(`(name = "w${i}", worker = .w${i})`);
    sockets.push(`(name = "s${i}", address = "127.0.0.1:${ports[i]}", http = (), service = "w${i}")`);
    defs += worker(`w${i}`, workerFile, true, bundle);
  }
  extraServices.forEach((e, j) => {
    const i = n + j;
    services.push(`(name = "x${j}", worker = .x${j})`);
    sockets.push(`(name = "sx${j}", address = "127.0.0.1:${ports[i]}", http = (), service = "x${j}")`);
    defs += worker(`x${j}`, e.workerFile, e.withPackage, e.bundle);
  });
  const capnp = `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [
    ${services.join(',\n    ')},
    (name = "loopback", network = (allow = ["public", "private", "local"]${tls ? `, tlsOptions = (trustedCertificates = [${tls.map(q).join(', ')}])` : ''})),
  ],
  sockets = [${sockets.join(', ')}],
);
${defs}
`;
  const cfgPath = path.join(dir, 'config.capnp');
  writeFileSync(cfgPath, capnp);
  const p = spawn(workerdBin(), ['serve', cfgPath, '--experimental'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  p.stdout.on('data', (d) => { out += d; });
  p.stderr.on('data', (d) => { out += d; });
  const exited = new Promise((r) => p.once('exit', r));
  const urls = ports.map((pt) => `http://127.0.0.1:${pt}`);
  await Promise.race([Promise.all(urls.map((u) => waitUp(u, 30000))), exited.then(() => { throw new Error(`workerd exited: ${out}`); })]);
  return {
    urls: urls.slice(0, n),
    extraUrls: urls.slice(n),
    output: () => out,
    async stop() { if (p.exitCode === null) { p.kill('SIGTERM'); await exited; } },
  };
}
