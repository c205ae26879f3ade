// Reading a coordinator's answer with a bound: a body longer than the
// largest reply a coordinator sends is not read past it (a broken or
// hostile server could otherwise fill the isolate's memory: Workers have
// 128 MB), as the Go host's sync transport reads at most
// wire.MaxReplyBytes.

import { EdgeLimitError } from './errors.js';

/** The largest reply a coordinator sends, bytes (wire.MaxReplyBytes; a Go test checks they agree). */
export const MAX_REPLY_BYTES = 9301068;

/**
 * The body of resp (a fetch Response, or an object with arrayBuffer())
 * as a Uint8Array of at most cap bytes; longer, it stops reading and
 * throws an EdgeLimitError code "sync" naming url (failover false: every
 * coordinator sends the same reply).
 */
export async function readReply(resp, url, cap = MAX_REPLY_BYTES) {
  const tooLarge = () => {
    const e = new EdgeLimitError(`sync: POST ${url}: reply larger than ${cap} bytes (the largest a coordinator sends): not read`, 'sync');
    e.failover = false;
    return e;
  };
  const body = resp.body;
  if (Number(resp.headers?.get?.('Content-Length')) > cap) {
    await body?.cancel?.().catch(() => {});
    throw tooLarge();
  }
  if (!body || typeof body.getReader !== 'function') {
    const b = new Uint8Array(await resp.arrayBuffer());
    if (b.length > cap) throw tooLarge();
    return b;
  }
  const reader = body.getReader();
  const chunks = [];
  let n = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    n += value.length;
    if (n > cap) {
      await reader.cancel().catch(() => {});
      throw tooLarge();
    }
    chunks.push(value);
  }
  if (chunks.length === 1) return chunks[0];
  const out = new Uint8Array(n);
  let off = 0;
  for (const c of chunks) { out.set(c, off); off += c.length; }
  return out;
}

/** Drops resp's body unread (a reading of the coordinator's time needs only its headers). */
export async function discardBody(resp) {
  if (typeof resp.body?.cancel === 'function') await resp.body.cancel().catch(() => {});
  else await resp.arrayBuffer?.();
}
