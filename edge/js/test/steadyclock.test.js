// The steady clock (the default own clock with a coordinator) never steps
// back when the wall clock is set back, and catches up when it is set
// forward by more than 1 s.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { steadyClock, STEADY_CATCH_UP_MS } from '../src/steadyclock.js';

test('a steady clock ignores the wall clock set back and catches up when it is set forward', () => {
  let mono = 1000; let wall = 1_800_000_000_000;
  const c = steadyClock(() => mono, () => wall);
  assert.equal(c(), wall);
  mono += 100; wall += 100;
  assert.equal(c(), 1_800_000_000_100);
  wall -= 5000; // set back 5 s
  mono += 50;
  assert.equal(c(), 1_800_000_000_150, 'the wall clock set back does not move it');
  wall += 5000 + 50 + 3000; // set forward past it by 3 s
  mono += STEADY_CATCH_UP_MS; wall += STEADY_CATCH_UP_MS; // it looks at the wall clock once a second
  assert.equal(c(), wall, 'caught up with the wall clock');
  mono += 10; wall += 10;
  assert.equal(c(), wall, 'and runs on from there');
  mono += STEADY_CATCH_UP_MS; wall += STEADY_CATCH_UP_MS + 500; // ahead by 500 ms, within the catch-up
  assert.equal(c(), wall - 500, 'a wall clock ahead by less than the catch-up does not move it');
});

test('without a monotonic clock it is the wall clock', () => {
  const wall = () => 42;
  assert.equal(steadyClock(null, wall), wall);
});
