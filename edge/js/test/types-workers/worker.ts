// Compiled by `tsc --strict` in test-js (test/types.test.js) as a Workers
// project compiles: moduleResolution "bundler", @cloudflare/workers-types
// and no lib "dom". It imports the package by its name (the package's
// self-reference, as an installed one resolves) and its module through
// the typed 'edgelimit/edgelimit.wasm' export: no `declare module '*.wasm'`.
import { EdgeLimit, EdgeLimitError, PROTOCOL_VERSION, type ErrorCode, type LimitResult } from 'edgelimit';
import wasm from 'edgelimit/edgelimit.wasm';

interface Env {
  LIMITS: string;
  EDGELIMIT_COORDINATOR?: string;
  EDGELIMIT_TOKEN?: string;
}

let rl: EdgeLimit | undefined;

export default {
  async fetch(request: Request, env: Env, ctx: ExecutionContext): Promise<Response> {
    const module: WebAssembly.Module = wasm;
    rl ??= await EdgeLimit.create({ wasm: module, config: env.LIMITS, coordinator: env.EDGELIMIT_COORDINATOR, token: env.EDGELIMIT_TOKEN });
    try {
      const d: LimitResult = await rl.limit({ limiter: 'api', key: request.headers.get('cf-connecting-ip') ?? 'anonymous' }, ctx);
      return new Response(d.success ? 'hello' : 'rate limited', { status: d.success ? 200 : 429 });
    } catch (e) {
      if (e instanceof EdgeLimitError) {
        const code: ErrorCode = e.code;
        return new Response(`${code} (protocol ${PROTOCOL_VERSION})`, { status: 500 });
      }
      throw e;
    }
  },
} satisfies ExportedHandler<Env>;
