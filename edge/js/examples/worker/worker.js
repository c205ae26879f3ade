// An example Cloudflare Worker limited by edgelimit: one limiter per
// client key, shared by every isolate of every location through the
// edgelimit coordinator. A starter: copy this folder, `npm install`, then
// `npx wrangler dev` (locally, in workerd) or `npx wrangler deploy`.
import { EdgeLimit } from 'edgelimit';
// The package's module: wrangler (and esbuild with the Workers loader)
// import a .wasm file as a compiled WebAssembly.Module.
import wasm from 'edgelimit/edgelimit.wasm';

let limiter;

export default {
  async fetch(request, env, ctx) {
    // Created inside the handler: env is only here, and workerd refuses
    // random numbers (the isolate id) at global scope.
    limiter ??= await EdgeLimit.create({
      wasm,
      config: env.LIMITS,
      coordinator: env.EDGELIMIT_COORDINATOR,
      token: env.EDGELIMIT_TOKEN,
      syncInterval: Number(env.EDGELIMIT_SYNC_MS ?? 100),
    });
    const key = request.headers.get('cf-connecting-ip') ?? new URL(request.url).searchParams.get('key') ?? 'anonymous';
    const { success, limit, remaining, reset, retryAfterMs } = await limiter.limit({ limiter: 'api', key }, ctx);
    const headers = {
      'RateLimit-Policy': `"api";q=${limit}`,
      RateLimit: `"api";r=${remaining};t=${Math.max(Math.ceil((reset - Date.now()) / 1000), 0)}`,
    };
    if (!success) {
      if (retryAfterMs >= 0) headers['Retry-After'] = String(Math.max(Math.ceil(retryAfterMs / 1000), 1));
      return new Response('rate limited\n', { status: 429, headers });
    }
    return new Response('hello\n', { headers });
  },
};
