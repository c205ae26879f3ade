// Compiled by `tsc --noEmit` in test-js: the declarations (src/index.d.ts)
// describe the API as the README and the examples use it.
import { EdgeLimit, EdgeLimitError, parseDuration, type Config, type LimitResult, type WaitResult } from '../../src/index.js';

declare const wasm: WebAssembly.Module;

// The coordinator's file, its "coordinator" settings included, is a Config.
const shared: Config = { limiters: [{ name: 'mail', algorithm: 'fixed_window', limit: 20, period: '1d' }], coordinator: { listen: ':7070' } };
void shared;
declare const ctx: { waitUntil(p: Promise<unknown>): void };

async function handler(): Promise<number> {
  const rl = await EdgeLimit.create({
    wasm,
    config: { limiters: [{ name: 'api', algorithm: 'sliding_window', limit: 100, period: '1m', fail_policy: 'local-share' }] },
    coordinator: 'https://limits.example.com',
    token: 't',
    syncInterval: 100,
    shareIsolates: 10,
  });
  const { success, limit, remaining, reset, retryAfterMs }: LimitResult = await rl.limit({ limiter: 'api', key: 'k', cost: 1 }, ctx);
  const w: WaitResult = await rl.wait({ limiter: 'api', key: 'k', maxWaitMs: 500 });
  const n: number = await rl.schedule({ limiter: 'api', key: 'k' }, async () => 42);
  const multi = rl.decide({ checks: [{ limiter: 'api', key: 'k' }] });
  await rl.limit({ checks: [{ limiter: 'api', key: 'k', cost: 2 }] });
  await rl.wait({ checks: [{ limiter: 'api', key: 'k' }], maxWaitMs: 100 });
  // @ts-expect-error: a check and checks at once
  rl.decide({ key: 'k', checks: [{ limiter: 'api', key: 'k' }] });
  // @ts-expect-error: a check needs its key
  rl.decide({ limiter: 'api' });
  const ns: bigint = parseDuration('1s');
  try { rl.reset({ limiter: 'api', key: 'k' }); } catch (e) { if (e instanceof EdgeLimitError) console.log(e.code); }
  console.log(success, limit, remaining, reset, retryAfterMs, w.waitedMs, multi.policy, ns, rl.stats().keys, rl.isolateId);
  rl.close();
  return n;
}
handler();
