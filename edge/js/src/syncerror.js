// The errors of one sync attempt (POST /v1/sync): each names the URL and
// the cause, so a log line says which coordinator failed and why
// ("connect ECONNREFUSED 127.0.0.1:7070", "self-signed certificate", the
// coordinator's problem). failover marks a failure another coordinator
// may not have (unreachable, timed out, 502, 503, 504).

import { EdgeLimitError } from './errors.js';
import { PROTOCOL_VERSION } from './version.js';

const SEQ_PROBLEM = 'urn:edgelimit:problem:seq_';
const VERSION_PROBLEM = 'urn:edgelimit:problem:version';
const SKEW_PROBLEM = 'urn:edgelimit:problem:clock_skew';

// The message of err and of its causes, most specific last:
// "fetch failed: connect ECONNREFUSED 127.0.0.1:1 (ECONNREFUSED)".
export function describe(err) {
  const parts = [];
  for (let e = err, depth = 0; e != null && depth < 5; e = e.cause, depth++) {
    if (typeof e !== 'object') { parts.push(String(e)); break; }
    let m = e.message || String(e);
    if (Array.isArray(e.errors) && e.errors.length > 0) m += ` [${e.errors.map((x) => x?.message ?? String(x)).join('; ')}]`;
    if (typeof e.code === 'string' && !m.includes(e.code)) m += ` (${e.code})`;
    if (!parts.includes(m)) parts.push(m);
  }
  return parts.join(': ') || 'unknown error';
}

/**
 * The error of an attempt that got no answer from url: code "sync"
 * naming the cause (err, the fetch's error), or err itself when it is the
 * attempt's own timeout (code "sync_timeout"). Both fail over. method names
 * the request (POST a batch, GET a reading of the coordinator's time).
 */
export function unreachable(url, err, method = 'POST') {
  if (err instanceof EdgeLimitError) {
    err.failover = err.code === 'sync_timeout' || err.failover === true;
    return err;
  }
  const e = new EdgeLimitError(`sync: ${method} ${url}: ${describe(err)}`, 'sync', { cause: err });
  e.failover = true;
  return e;
}

/**
 * What an answer other than 200 from url means: {seqProblem: true,
 * detail} for a 409 sequence problem (the isolate starts a new
 * incarnation), {skewProblem: true, detail} for a batch refused for times
 * ahead of the coordinator's clock (400 clock_skew: the isolate takes it
 * back and cuts it again at the coordinator's time), else an EdgeLimitError to throw: code "version_mismatch"
 * for the coordinator's version problem (naming both versions),
 * "sync_refused" with the status and the start of the problem otherwise
 * (a redirect: naming its location, which is not followed).
 */
export function refusal(url, status, body, location) {
  if (status >= 300 && status <= 399) {
    // Not followed (redirect: 'manual'): it would post the batch, key
    // names included, wherever it points (as the Go host's
    // syncloop.NoRedirect).
    const err = new EdgeLimitError(`sync: POST ${url}: the coordinator answered ${status}, a redirect to ${JSON.stringify(location ?? '')}, which the sync does not follow: give the coordinator's own URL`, 'sync_refused');
    err.status = status;
    err.failover = false;
    return err;
  }
  const text = new TextDecoder().decode(body.subarray(0, 2048));
  let p = null;
  try { p = JSON.parse(text); } catch { /* not problem+json: an ordinary refusal */ }
  if (status === 409 && typeof p?.type === 'string' && p.type.startsWith(SEQ_PROBLEM)) {
    return { seqProblem: true, detail: `${p.type}: ${p.detail ?? ''}` };
  }
  if (status === 400 && p?.type === SKEW_PROBLEM) {
    return { skewProblem: true, detail: `${p.type}: ${p.detail ?? ''}` };
  }
  if (status === 400 && p?.type === VERSION_PROBLEM) {
    const want = p.want ?? '?';
    return new EdgeLimitError(`sync: POST ${url}: the coordinator speaks protocol version ${want}, this package and its module version ${PROTOCOL_VERSION}: ` +
      `upgrade whichever is older (${p.detail ?? ''})`, 'version_mismatch');
  }
  let detail = text.slice(0, 300);
  if (body.length > 300) detail += '...';
  const err = new EdgeLimitError(`sync: POST ${url}: coordinator refused the batch: ${status}: ${detail}`, 'sync_refused');
  err.status = status;
  err.failover = status === 502 || status === 503 || status === 504;
  return err;
}

/**
 * The error of a 200 answer from url that is a web page (Content-Type
 * contentType is text/html): a proxy, captive portal or load balancer
 * answering in the coordinator's place. Code "sync_refused" naming the
 * type and the page's start (the module's decoder said only "malformed
 * input"); it fails over, as a 502 does. Null for any other answer (a
 * coordinator answers application/msgpack; only HTML is refused, as by the
 * Go host's syncloop).
 */
export function notAReply(url, contentType, body) {
  const mt = String(contentType ?? '').split(';')[0].trim().toLowerCase();
  if (mt !== 'text/html') return null;
  const start = new TextDecoder().decode(body.subarray(0, 120));
  const err = new EdgeLimitError(`sync: POST ${url}: answered 200 with Content-Type ${JSON.stringify(contentType)}, a web page, not the coordinator's msgpack reply (a proxy or captive portal in the way?): ${JSON.stringify(start)}`, 'sync_refused');
  err.status = 200;
  err.failover = true;
  return err;
}

/**
 * Whether e is a refusal no retry mends: the coordinator answered 401 or
 * 403 (a token it does not accept, or one without the edge role), 404 or
 * 405 (the URL names no coordinator's sync endpoint), or a redirect.
 */
export function misconfigured(e) {
  return e?.code === 'sync_refused' && ([401, 403, 404, 405].includes(e.status) || (e.status >= 300 && e.status <= 399));
}
