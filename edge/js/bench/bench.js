// Bounded measurements of the JavaScript package (README "JavaScript"):
//   make bench-js        (or: EDGELIMIT_BIN=bin/edgelimit node edge/js/bench/bench.js)
// 1. a decision in Node: decide() and limit() on one hot 32-byte key (key copy included);
// 2. decide() going round 100,000 keys against the hot key (the ratio; Node and workerd);
// 3. linear memory of one isolate holding 100,000 keys of 32 bytes;
// 4. a decision in workerd: a request running n decisions, timed against n = 0;
// 5. the example Worker's requests/s in workerd against the same Worker with no limiter.
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { EdgeLimit } from '../src/index.js';
import { wasmModule } from '../test/helpers.js';
import { startCoordinator } from '../test/coordinator.js';
import { startWorkerd, workerdBin } from '../test/workerd/run.js';
import { buildStarter } from '../test/starter.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const RUNS = Number(process.env.RUNS ?? 5);
const KEYS = 100_000;
const KEY = 'bench-key-0123456789abcdefghijkl'; // 32 bytes
// approximate: in workerd the Worker syncs (auto would need a lease per new key, which a
// request that loops without I/O never gets); in Node it decides alone (auto runs as approximate).
const big = { limiters: [{ name: 'bench', algorithm: 'fixed_window', limit: 1000000000, period: '1s', mode: 'approximate' }] };
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const range = (xs) => `${Math.min(...xs).toFixed(0)}-${Math.max(...xs).toFixed(0)}`;

async function nodeDecisions() {
  const rl = await EdgeLimit.create({ wasm: wasmModule, config: big });
  const N = 2_000_000;
  const time = (fn) => { const t = process.hrtime.bigint(); fn(); return Number(process.hrtime.bigint() - t) / N; };
  const dec = []; const raw = []; const lim = [];
  for (let r = 0; r < RUNS; r++) {
    dec.push(time(() => { for (let i = 0; i < N; i++) rl.decide({ limiter: 'bench', key: KEY }); }));
    const m = rl.module; const now = 1_800_000_000_000_000_000n;
    raw.push(time(() => { for (let i = 0; i < N; i++) m.decide(0, KEY, 1, now); }));
    const t = process.hrtime.bigint();
    for (let i = 0; i < N; i++) await rl.limit({ limiter: 'bench', key: KEY });
    lim.push(Number(process.hrtime.bigint() - t) / N);
  }
  console.log(`node: decide() ${median(dec).toFixed(0)} ns (runs ${range(dec)}), limit() ${median(lim).toFixed(0)} ns (${range(lim)}), Module.decide ${median(raw).toFixed(0)} ns (${range(raw)}) per decision, hot 32-byte key`);
}

// n distinct 32-byte keys as flat strings, as a request's header value or
// URL parameter is (a template literal makes a rope, which V8 flattens at
// its first read into a string the rope then points to: one more pointer
// to follow, and one more cache miss, per later read).
function flatKeys(n) {
  const td = new TextDecoder(); const te = new TextEncoder();
  return Array.from({ length: n }, (_, i) => td.decode(te.encode(`key-${String(i).padStart(28, '0')}`)));
}

// 100,000 keys against one hot key in the same isolate, runs
// interleaved (the machine's load moves both alike): the cost of a
// decision whose key is not in the CPU's caches (the module's table is
// ~18 MiB) and whose encoding is not cached.
async function nodeManyKeys() {
  const rl = await EdgeLimit.create({ wasm: wasmModule, config: big });
  const keys = flatKeys(KEYS);
  for (const key of keys) rl.decide({ limiter: 'bench', key });
  const N = 1_000_000;
  const time = (fn) => { const t = process.hrtime.bigint(); fn(); return Number(process.hrtime.bigint() - t) / N; };
  const hot = []; const many = []; const ratio = []; const rawHot = []; const rawMany = [];
  const m = rl.module; const now = BigInt(Date.now()) * 1000000n;
  for (let r = 0; r < RUNS; r++) {
    hot.push(time(() => { for (let i = 0; i < N; i++) rl.decide({ limiter: 'bench', key: KEY }); }));
    many.push(time(() => { for (let i = 0; i < N; i++) rl.decide({ limiter: 'bench', key: keys[i % KEYS] }); }));
    ratio.push(many[r] / hot[r]);
    rawHot.push(time(() => { for (let i = 0; i < N; i++) m.decide(0, KEY, 1, now); }));
    rawMany.push(time(() => { for (let i = 0; i < N; i++) m.decide(0, keys[i % KEYS], 1, now); }));
  }
  console.log(`node: decide() over ${KEYS.toLocaleString('en')} keys ${median(many).toFixed(0)} ns (runs ${range(many)}) against ${median(hot).toFixed(0)} ns (${range(hot)}) ` +
    `for the hot key: ${median(ratio).toFixed(2)}x (runs ${ratios(ratio)}); the module alone (Module.decide) ${median(rawMany).toFixed(0)} ns (${range(rawMany)}) against ${median(rawHot).toFixed(0)} ns (${range(rawHot)})`);
}

const ratios = (xs) => `${Math.min(...xs).toFixed(2)}-${Math.max(...xs).toFixed(2)}x`;

async function nodeMemory() {
  const rl = await EdgeLimit.create({ wasm: wasmModule, config: big });
  rl.ready();
  const before = rl.module.memoryBytes();
  for (let i = 0; i < 100_000; i++) rl.decide({ limiter: 'bench', key: `key-${String(i).padStart(28, '0')}` });
  const s = rl.stats();
  console.log(`memory: 100,000 keys of 32 bytes: linear memory ${(s.memoryBytes / 2 ** 20).toFixed(1)} MiB (${before / 1024} KiB empty), ` +
    `${((s.memoryBytes - before) / 100_000).toFixed(0)} bytes/key; module state_bytes ${(s.state_bytes / 2 ** 20).toFixed(1)} MiB; keys ${s.keys}`);
}

function get(agent, url) {
  return new Promise((resolve, reject) => {
    http.get(url, { agent }, (res) => { res.resume(); res.on('end', () => resolve(res.statusCode)); }).on('error', reject);
  });
}

async function workerdDecisions(url) {
  const agent = new http.Agent({ keepAlive: true });
  const N = 1_000_000;
  const timed = async (n, q = '') => { const t = process.hrtime.bigint(); await get(agent, `${url}/bench?n=${n}${q}`); return Number(process.hrtime.bigint() - t); };
  await timed(1000); // instantiate, warm up
  const per = [];
  for (let r = 0; r < RUNS; r++) {
    const empty = await timed(0);
    per.push((await timed(N) - empty) / N);
  }
  console.log(`workerd: ${median(per).toFixed(0)} ns per decide() (runs ${range(per)}), hot 32-byte key`);
  // 100,000 keys against the hot key, runs interleaved.
  await timedKeys(1000); // one decision of each key first
  for (const q of ['', `&keys=${KEYS}`]) {
    const r = await (await fetch(`${url}/bench?n=1000${q}`)).json();
    if (r.ok !== r.n) throw new Error(`bench: ${r.ok} of ${r.n} decisions admitted (${q || 'hot key'}): not the admitted path`);
  }
  const hot = []; const many = []; const ratio = []; const rawHot = []; const rawMany = [];
  for (let r = 0; r < RUNS; r++) {
    const empty = await timed(0);
    hot.push((await timed(N) - empty) / N);
    many.push((await timedKeys(N) - empty) / N);
    ratio.push(many[r] / hot[r]);
    rawHot.push((await timed(N, '&raw=1') - empty) / N);
    rawMany.push((await timedKeys(N, '&raw=1') - empty) / N);
  }
  agent.destroy();
  console.log(`workerd: decide() over ${KEYS.toLocaleString('en')} keys ${median(many).toFixed(0)} ns (runs ${range(many)}) against ${median(hot).toFixed(0)} ns (${range(hot)}) ` +
    `for the hot key: ${median(ratio).toFixed(2)}x (runs ${ratios(ratio)}); the module alone (Module.decide) ${median(rawMany).toFixed(0)} ns (${range(rawMany)}) against ${median(rawHot).toFixed(0)} ns (${range(rawHot)})`);
  async function timedKeys(n, q = '') { const t = process.hrtime.bigint(); await get(agent, `${url}/bench?n=${n}&keys=${KEYS}${q}`); return Number(process.hrtime.bigint() - t); }
}

async function load(url, ms, conc) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: conc });
  let n = 0; let limited = 0;
  const end = Date.now() + ms;
  await Promise.all(Array.from({ length: conc }, async (_, c) => {
    while (Date.now() < end) {
      const st = await get(agent, `${url}/?key=client-${c}`);
      n++;
      if (st === 429) limited++;
    }
  }));
  agent.destroy();
  return { rps: n / (ms / 1000), limited };
}

async function main() {
  await nodeDecisions();
  await nodeManyKeys();
  await nodeMemory();
  if (!workerdBin()) { console.log('workerd: not installed (npm ci in edge/js)'); return; }
  const coord = await startCoordinator({ limiters: [...big.limiters, { name: 'api', algorithm: 'sliding_window', limit: 1000000000, period: '1m' }] });
  const cfg = JSON.stringify({ limiters: [...big.limiters, { name: 'api', algorithm: 'sliding_window', limit: 1000000000, period: '1m' }] });
  const wd = await startWorkerd({ n: 1, workerFile: path.join(here, '../test/workerd/worker.js'),
    bindings: { LIMITS: cfg, COORDINATOR: coord.url, SYNC_MS: 100, EDGELIMIT_COORDINATOR: coord.url, EDGELIMIT_SYNC_MS: 100 },
    extraServices: [
      { bundle: buildStarter().dist }, // the starter, installed from the packed package and bundled by wrangler
      { workerFile: path.join(here, 'baseline.js'), withPackage: false },
    ] });
  try {
    await workerdDecisions(wd.urls[0]);
    const [example, baseline] = wd.extraUrls;
    await load(example, 500, 8); await load(baseline, 500, 8); // warm up
    const ex = []; const base = [];
    for (let r = 0; r < 3; r++) {
      ex.push((await load(example, 3000, 16)).rps);
      base.push((await load(baseline, 3000, 16)).rps);
    }
    console.log(`example Worker: ${median(ex).toFixed(0)} requests/s with the limiter (runs ${range(ex)}), ` +
      `${median(base).toFixed(0)} without (${range(base)}): ${(100 * median(ex) / median(base)).toFixed(0)}%; 16 keep-alive connections from Node on the same machine`);
  } finally {
    await wd.stop();
    await coord.stop();
  }
}

main().catch((e) => { console.error(e); process.exit(1); });
