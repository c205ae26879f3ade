// The examples run as shipped: the starter Worker (examples/worker) after
// `npm install` of the packed package, bundled by wrangler and served by
// real workerd, and the Node server, both against the real coordinator.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startCoordinator, freePort, waitUp } from './coordinator.js';
import { startWorkerd, workerdBin } from './workerd/run.js';
import { buildStarter, esbuildStarter, wranglerBin } from './starter.js';
import { wasmBytes } from './helpers.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const config = { limiters: [{ name: 'api', algorithm: 'sliding_window', limit: 3, period: '1m' }] };
const stops = [];
after(async () => { for (const s of stops.reverse()) await s(); });

async function expectLimited(url, output = () => '') {
  const got = [];
  for (let i = 0; i < 5; i++) {
    const r = await fetch(`${url}/?key=alice`);
    got.push(r.status === 200 || r.status === 429 ? r.status : `${r.status} ${await r.clone().text()}`);
    if (r.status !== 200 && r.status !== 429) continue; // the deepEqual below says what came
    if (r.status === 429) assert.ok(Number(r.headers.get('retry-after')) >= 1, 'Retry-After on a 429');
    assert.match(r.headers.get('ratelimit') ?? '', /^"api";r=\d+;t=\d+$/);
    await r.arrayBuffer();
  }
  assert.deepEqual(got, [200, 200, 200, 429, 429], `statuses ${got}\n${output()}`);
  assert.equal((await fetch(`${url}/?key=bob`)).status, 200, 'another key has its own limit');
}

test('the starter Worker: npm install of the packed package, bundled by wrangler and by esbuild, served by workerd',
  { skip: workerdBin() && wranglerBin() ? false : 'workerd or wrangler is not installed (npm ci in edge/js)', timeout: 120000 }, async () => {
    const s = buildStarter();
    for (const f of ['edgelimit.wasm', 'LICENSE', 'README.md', 'package.json', 'src/index.js', 'src/index.d.ts', 'src/node.js', 'src/wasm.d.ts']) {
      assert.ok(s.files.includes(f), `the tarball holds ${f}: ${s.files.join(', ')}`);
    }
    const installed = path.join(s.project, 'node_modules/edgelimit');
    assert.ok(readFileSync(path.join(installed, 'edgelimit.wasm')).equals(wasmBytes), 'the installed module is the committed wasm/edgelimit.wasm');
    const pkg = JSON.parse(readFileSync(path.join(installed, 'package.json'), 'utf8'));
    assert.equal(pkg.license, 'Apache-2.0');
    assert.equal(pkg.private, undefined);
    const bundledWasm = s.bundleFiles.filter((f) => f.endsWith('.wasm'));
    assert.equal(bundledWasm.length, 1, `wrangler emitted the module beside the bundle: ${s.bundleFiles}`);
    assert.ok(readFileSync(path.join(s.dist, bundledWasm[0])).equals(wasmBytes), 'the bundled module is the committed one');
    const coord = await startCoordinator(config);
    stops.push(() => coord.stop());
    const wd = await startWorkerd({ n: 1, bundle: s.dist,
      bindings: { LIMITS: JSON.stringify(config), EDGELIMIT_COORDINATOR: coord.url, EDGELIMIT_SYNC_MS: 50 } });
    stops.push(() => wd.stop());
    await expectLimited(wd.urls[0], wd.output);

    // esbuild alone: the .wasm import kept external, the module given to
    // workerd under its import name.
    const out = esbuildStarter(s.project);
    assert.match(readFileSync(path.join(out, 'worker.js'), 'utf8'), /import \w+ from "edgelimit\/edgelimit\.wasm"/);
    const coord2 = await startCoordinator(config);
    stops.push(() => coord2.stop());
    const wd2 = await startWorkerd({ n: 1, bundle: out, wasmModules: { 'edgelimit/edgelimit.wasm': path.join(installed, 'edgelimit.wasm') },
      bindings: { LIMITS: JSON.stringify(config), EDGELIMIT_COORDINATOR: coord2.url, EDGELIMIT_SYNC_MS: 50 } });
    stops.push(() => wd2.stop());
    await expectLimited(wd2.urls[0], wd2.output);
  });

test('the example Node server', { timeout: 60000 }, async () => {
  const coord = await startCoordinator(config);
  stops.push(() => coord.stop());
  const port = await freePort();
  const p = spawn(process.execPath, [path.join(here, '../examples/node/server.js')], {
    env: { ...process.env, PORT: String(port), LIMITS: JSON.stringify(config), EDGELIMIT_COORDINATOR: coord.url }, stdio: 'ignore',
  });
  const exited = new Promise((r) => p.once('exit', r));
  stops.push(async () => { if (p.exitCode === null) { p.kill('SIGTERM'); await exited; } });
  await waitUp(`http://127.0.0.1:${port}/?key=probe`);
  await expectLimited(`http://127.0.0.1:${port}`);
});

// A graceful stop strands nothing: the example Node server SIGTERMed in
// the middle of a window (its handler calls close(), whose last batch
// reports what the isolate admitted and gives its leases back), and a new
// one admits the rest of the limit.
test('the example Node server SIGTERMed mid-window: a new one admits the rest of the limit', { timeout: 60000 }, async () => {
  for (const algorithm of ['fixed_window', 'sliding_window', 'gcra']) {
    const limits = { limiters: [{ name: 'api', algorithm, limit: 100, period: '24h' }] };
    const coord = await startCoordinator(limits);
    stops.push(() => coord.stop());
    const server = async () => {
      const port = await freePort();
      const p = spawn(process.execPath, [path.join(here, '../examples/node/server.js')], {
        env: { ...process.env, PORT: String(port), LIMITS: JSON.stringify(limits), EDGELIMIT_COORDINATOR: coord.url }, stdio: 'ignore',
      });
      const exited = new Promise((r) => p.once('exit', (code, signal) => r({ code, signal })));
      stops.push(async () => { if (p.exitCode === null && p.signalCode === null) { p.kill('SIGTERM'); await exited; } });
      await waitUp(`http://127.0.0.1:${port}/healthz?key=probe`);
      const burst = async (n) => {
        let ok = 0;
        for (let i = 0; i < n; i++) { const r = await fetch(`http://127.0.0.1:${port}/?key=k`); await r.arrayBuffer(); if (r.status === 200) ok++; }
        return ok;
      };
      return { burst, term: async () => { p.kill('SIGTERM'); return exited; } };
    };
    const a = await server();
    // waitUp's probe was one admitted request of another key; 30 of key k.
    const first = await a.burst(30);
    assert.deepEqual(await a.term(), { code: 0, signal: null }, 'the server exits on SIGTERM');
    const b = await server();
    const second = await b.burst(120);
    console.log(`# ${algorithm} 100/day: ${first} admitted, SIGTERM, a new server admitted ${second}`);
    assert.deepEqual([first, second], [30, 70], `${algorithm}: nothing stranded`);
  }
});
