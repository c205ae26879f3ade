// Amendments whose batch's attempt ended otherwise, against the real Go
// coordinator on loopback (a fetch wrapper fails or refuses chosen posts):
// an amendment's reply that comes after its batch's attempt failed answers
// the batch (the module takes it as the batch's own), so the next batch is
// a new cut with its own tally of amendments; an amendment refused with its
// batch for the sequence number is out of the tally of the new
// incarnation's batch 1. In both, a batch then refused for its times with
// its one amendment is taken back (recalls 1); before, it was resent as it
// was, refused until the coordinator's clock caught up.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { EdgeLimit } from '../src/index.js';
import { wasmModule, scriptedFetch, problem, hourConfig } from './helpers.js';
import { startCoordinator } from './coordinator.js';

const coords = [];
after(async () => { for (const c of coords) await c.stop(); });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

test('an amendment\'s reply after its batch\'s attempt failed answers the batch: the next batch, refused for its times with its amendment, is taken back', async () => {
  const c = await startCoordinator(hourConfig); coords.push(c);
  const posts = [];
  const fetchFn = scriptedFetch(posts, async (n) => {
    if (n === 0) { await sleep(150); return problem(503, 'about:blank'); } // batch 1: fails
    if (n === 1) await sleep(250); // its amendment: applied, its reply after the failure
    if (n === 2) { await sleep(300); return problem(400, 'urn:edgelimit:problem:clock_skew'); } // batch 2: refused for its times
    if (n === 3) return problem(400, 'urn:edgelimit:problem:clock_skew'); // batch 2's amendment: refused too
    return undefined;
  });
  const rl = await EdgeLimit.create({ wasm: wasmModule, config: hourConfig, coordinator: c.url, syncInterval: 60000, fetch: fetchFn });
  try {
    const h1 = rl.limit({ limiter: 's', key: 'x' }); // held: cuts batch 1
    while (posts.length < 1) await sleep(5);
    const h2 = rl.limit({ limiter: 's', key: 'y' }); // amends batch 1
    while (posts.length < 2) await sleep(5);
    await sleep(400); // batch 1 failed at 150 ms, the amendment's reply applied at ~250 ms
    const mid = { cuts: rl._cuts, unanswered: rl._unanswered, tally: { ...rl._amendTally }, syncs: rl.counters.syncs, stats: rl._mod.stats().batches };
    const h3 = rl.limit({ limiter: 's', key: 'z' }); // held: cuts batch 2
    while (posts.length < 3) await sleep(5);
    const h4 = rl.limit({ limiter: 's', key: 'w' }); // amends batch 2
    while (posts.length < 4) await sleep(5);
    while (rl._inflight) await sleep(5);
    await Promise.allSettled([h1, h2, h3, h4]);
    console.log(`# after batch 1's amendment: ${JSON.stringify(mid)}; posts ${JSON.stringify(posts.map((p) => [p.seq, p.ak]))}; tally ${JSON.stringify(rl._amendTally)}, cuts ${rl._cuts}, recalls ${rl.counters.recalls}, ${rl.lastError?.message}`);
    assert.equal(posts[2].seq, 2, 'the test misses its case: post 2 is not batch 2');
    assert.equal(rl.counters.recalls, 1, `batch 2 (refused for its times, its one amendment refused too) was not taken back: ${rl.lastError?.message}`);
  } finally { await rl.close(); }
});

test('an amendment refused with its batch for the sequence number is out of the new incarnation\'s tally: its batch 1, refused for its times with its amendment, is taken back', async () => {
  const c = await startCoordinator(hourConfig); coords.push(c);
  const posts = [];
  const fetchFn = scriptedFetch(posts, async (n) => {
    if (n === 0) { await sleep(200); return problem(409, 'urn:edgelimit:problem:seq_gap'); } // batch: refused for its seq
    if (n === 1) return problem(409, 'urn:edgelimit:problem:seq_gap'); // its amendment too
    if (n === 2) { await sleep(300); return problem(400, 'urn:edgelimit:problem:clock_skew'); } // batch 1 of the new id: refused for its times
    if (n === 3) return problem(400, 'urn:edgelimit:problem:clock_skew'); // its amendment too
    return undefined;
  });
  const rl = await EdgeLimit.create({ wasm: wasmModule, config: hourConfig, coordinator: c.url, syncInterval: 60000, fetch: fetchFn });
  try {
    const h1 = rl.limit({ limiter: 's', key: 'x' });
    while (posts.length < 1) await sleep(5);
    const h2 = rl.limit({ limiter: 's', key: 'y' }); // amends it
    while (posts.length < 3) await sleep(5); // reincarnated, batch 1 of the new id on its way
    const h3 = rl.limit({ limiter: 's', key: 'z' }); // amends batch 1 of the new id
    while (posts.length < 4) await sleep(5);
    while (rl._inflight) await sleep(5);
    await Promise.allSettled([h1, h2, h3]);
    console.log(`# posts ${JSON.stringify(posts.map((p) => [p.seq, p.ak]))}; tally ${JSON.stringify(rl._amendTally)}, reincarnations ${rl.counters.reincarnations}, recalls ${rl.counters.recalls}, ${rl.lastError?.message}`);
    assert.equal(posts[3].ak, true, 'the test misses its case');
    assert.equal(rl.counters.recalls, 1, `batch 1 of the new incarnation was not taken back: ${rl.lastError?.message}`);
  } finally { await rl.close(); }
});
