// The replies a request held by limit() waits for (src/retry.js): the rule
// of the Go edge host and the simulator (edge/syncloop/retry.go,
// TestRetryNewWindow), in milliseconds.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Retry, REPLIES } from '../src/retry.js';

// replies counts the replies r waits for from now on, deciding the request
// again at each time in ats (its decision's window ending at reset).
function replies(r, ats, reset) {
  let n = 0;
  for (const at of ats) {
    if (!r.again()) break;
    r.replied();
    n++;
    r.newWindow(at);
    r.decided(reset(at), at);
  }
  return n;
}

test('a held request waits for three replies in its window', () => {
  const r = new Retry();
  r.decided(1000, 900); // decided at 900 ms in a window that ends at 1000
  assert.equal(REPLIES, 3);
  assert.equal(replies(r, [920, 940, 960, 980, 990], () => 1000), 3);
});

test('decided again after its window ended, it waits for one reply more, once', () => {
  const r = new Retry();
  r.decided(1000, 950);
  // The first reply comes in the next window (ends at 2000), the rest too.
  assert.equal(replies(r, [1010, 1040, 1080, 1120, 1160, 1200], (at) => (at < 1000 ? 1000 : 2000)), 4);

  // Crossing a second window's end gives nothing more.
  const twice = new Retry();
  twice.decided(1000, 990);
  assert.equal(replies(twice, [1010, 1990, 2010, 2050, 2100], (at) => Math.floor(at / 1000) * 1000 + 1000), 4);
});

test('a reply before the window ends gives nothing more', () => {
  const r = new Retry();
  r.decided(1000, 900);
  assert.equal(replies(r, [999, 999, 999, 999], () => 1000), 3);
});

test('a full bucket (reset not after the decision) has no window to leave', () => {
  const r = new Retry();
  r.decided(500, 900); // a bucket's reset in the past: none
  assert.equal(replies(r, [1000, 2000, 3000, 4000], () => 0), 3);
  const same = new Retry();
  same.decided(900, 900); // a reset at the decision's own time: none either
  assert.equal(replies(same, [5000, 6000, 7000, 8000], () => 900), 3);
});

test('the count of replies is the caller\'s', () => {
  const r = new Retry(1);
  assert.equal(r.again(), true);
  r.replied();
  assert.equal(r.again(), false);
});
