// The Worker the workerd tests run: the package as a Worker uses it, plus
// routes to look inside (module digest, stats, a bounded decision loop).
import { EdgeLimit } from '../../src/index.js';
import wasm from './edgelimit.wasm';
import wasmBytes from './edgelimit.bin';

let rl;
const warmed = new Set();
let many = [];

// k distinct keys of 32 bytes as flat strings (bench.js's flatKeys).
function manyKeys(k) {
  const td = new TextDecoder(); const te = new TextEncoder();
  if (many.length !== k) many = Array.from({ length: k }, (_, i) => td.decode(te.encode(`key-${String(i).padStart(28, '0')}`)));
  return many;
}

// Options left unset in env take the package's defaults.
function limiter(env) {
  const num = (v) => (v === undefined ? undefined : Number(v));
  rl ??= new EdgeLimit({
    wasm, config: JSON.parse(env.LIMITS), coordinator: env.COORDINATOR, syncInterval: num(env.SYNC_MS),
    syncTimeout: num(env.SYNC_TIMEOUT_MS), backoffMax: num(env.BACKOFF_MAX_MS),
  });
  return rl;
}

export default {
  async fetch(request, env, ctx) {
    const url = new URL(request.url);
    const rl = limiter(env);
    switch (url.pathname) {
      case '/limit': {
        const d = await rl.limit({ limiter: url.searchParams.get('limiter'), key: url.searchParams.get('key') }, ctx);
        return Response.json(d, { status: d.success ? 200 : 429 });
      }
      case '/decide-noctx': {
        // A request that does not pass ctx: a sync it starts is cancelled
        // when the response goes out.
        const d = rl.decide({ limiter: url.searchParams.get('limiter'), key: url.searchParams.get('key') });
        return Response.json(d, { status: d.success ? 200 : 429 });
      }
      case '/observe': {
        // What an upstream answered, as a Worker gets it from fetch: a
        // Response with its headers.
        const headers = {};
        const ra = url.searchParams.get('retry_after');
        if (ra !== null) headers['Retry-After'] = ra;
        const answer = new Response(null, { status: Number(url.searchParams.get('status')), headers });
        return Response.json(rl.observe({ limiter: url.searchParams.get('limiter'), key: url.searchParams.get('key'), response: answer }, ctx));
      }
      case '/sync':
        return Response.json({ ok: await rl.sync(), error: String(rl.lastError ?? '') });
      case '/stats':
        return Response.json(rl.stats());
      case '/digest': {
        const h = new Uint8Array(await crypto.subtle.digest('SHA-256', wasmBytes));
        return Response.json({
          sha256: [...h].map((b) => b.toString(16).padStart(2, '0')).join(''),
          exports: WebAssembly.Module.exports(wasm).map((e) => e.name),
        });
      }
      case '/bench': {
        // n decisions of one key (key copy included), or, with keys=K, n
        // decisions going round K distinct 32-byte keys (after one
        // decision of each); the caller times the request against one with
        // n=0 (Date.now does not advance while a Worker computes).
        const n = Number(url.searchParams.get('n'));
        const k = Number(url.searchParams.get('keys') ?? 0);
        let ok = 0;
        // raw=1: the module alone (Module.decide: key copy and el_decide).
        const raw = url.searchParams.get('raw') === '1';
        const m = rl.module;
        const now = BigInt(Date.now()) * 1000000n;
        if (k > 0) {
          const keys = manyKeys(k);
          if (!warmed.has(k)) { for (const key of keys) rl.decide({ limiter: 'bench', key }); warmed.add(k); }
          if (raw) for (let i = 0; i < n; i++) ok += m.decide(0, keys[i % k], 1, now) & 1;
          else for (let i = 0; i < n; i++) ok += rl.decide({ limiter: 'bench', key: keys[i % k] }).success ? 1 : 0;
        } else {
          const key = url.searchParams.get('key') ?? 'bench-key-0123456789abcdefghijkl';
          if (raw) for (let i = 0; i < n; i++) ok += m.decide(0, key, 1, now) & 1;
          else for (let i = 0; i < n; i++) ok += rl.decide({ limiter: 'bench', key }).success ? 1 : 0;
        }
        return Response.json({ n, ok });
      }
    }
    return new Response('not found', { status: 404 });
  },
};
