// The example Worker's shape with no limiter: the baseline of bench.js.
export default {
  async fetch(request) {
    const key = request.headers.get('cf-connecting-ip') ?? new URL(request.url).searchParams.get('key') ?? 'anonymous';
    return new Response('hello\n', { headers: { 'RateLimit-Policy': '"api";q=100', RateLimit: `"api";r=99;t=60`, 'X-Key': key } });
  },
};
