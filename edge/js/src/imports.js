// The imports the edgelimit module needs: a few WASI preview1 functions
// (the TinyGo runtime's) and the Extism kernel ("extism:host/env") its
// Extism-style exports use. The scalar el_* exports call none of the
// kernel; it is provided so the module links and so configure errors can
// be read with their message (see Module.configure).

const ERRNO_SUCCESS = 0;
const ERRNO_BADF = 8;
const ERRNO_SPIPE = 70;

/**
 * Returns the import object for one instance. getMemory returns the
 * instance's memory once it exists; random fills a Uint8Array (default
 * crypto.getRandomValues: in workerd only inside a handler, which is why
 * the package instantiates lazily).
 */
export function makeImports(getMemory, opts = {}) {
  const random = opts.random ?? ((b) => crypto.getRandomValues(b));
  const log = opts.log ?? ((fd, s) => (fd === 2 ? console.error(s) : console.log(s)));
  const kernel = { input: new Uint8Array(0), mem: [], blocks: new Map(), output: null, err: null, size: 0 };
  const dv = () => new DataView(getMemory().buffer);
  const u8 = () => new Uint8Array(getMemory().buffer);
  const wasi = {
    fd_write(fd, iovs, iovsLen, nwritten) {
      const d = dv();
      let n = 0;
      const parts = [];
      for (let i = 0; i < iovsLen; i++) {
        const p = d.getUint32(iovs + 8 * i, true);
        const l = d.getUint32(iovs + 8 * i + 4, true);
        parts.push(u8().slice(p, p + l));
        n += l;
      }
      if (fd !== 1 && fd !== 2) return ERRNO_BADF;
      const s = new TextDecoder().decode(concat(parts)).replace(/\n$/, '');
      if (s) log(fd, `edgelimit module: ${s}`);
      d.setUint32(nwritten, n, true);
      return ERRNO_SUCCESS;
    },
    clock_time_get(_id, _precision, out) {
      dv().setBigUint64(out, BigInt(Date.now()) * 1000000n, true);
      return ERRNO_SUCCESS;
    },
    args_sizes_get(argc, argvBufSize) {
      const d = dv();
      d.setUint32(argc, 0, true);
      d.setUint32(argvBufSize, 0, true);
      return ERRNO_SUCCESS;
    },
    args_get() { return ERRNO_SUCCESS; },
    fd_close() { return ERRNO_BADF; },
    fd_seek() { return ERRNO_SPIPE; },
    random_get(buf, len) {
      const b = new Uint8Array(getMemory().buffer, buf, len);
      for (let o = 0; o < len; o += 65536) random(b.subarray(o, Math.min(o + 65536, len)));
      return ERRNO_SUCCESS;
    },
  };
  // The Extism kernel, as edge/isolate/kernel.go provides it: offsets are
  // 1-based positions in a host-side byte store (0 means none).
  const MAX_KERNEL_MEM = 64 << 20;
  const store = () => kernel.memBytes;
  const ensure = (n) => {
    if (!kernel.memBytes || kernel.memBytes.length < n) {
      const nb = new Uint8Array(Math.max(n, (kernel.memBytes?.length ?? 0) * 2, 1024));
      if (kernel.memBytes) nb.set(kernel.memBytes.subarray(0, kernel.size));
      kernel.memBytes = nb;
    }
  };
  const slice = (off, n) => {
    off = Number(off); n = Number(n);
    if (off === 0 || off - 1 + n > kernel.size) return null;
    return store().subarray(off - 1, off - 1 + n);
  };
  const env = {
    alloc(n) {
      n = Number(n);
      if (n > MAX_KERNEL_MEM || kernel.size + n > MAX_KERNEL_MEM) return 0n;
      const off = kernel.size + 1;
      ensure(kernel.size + n);
      store().fill(0, kernel.size, kernel.size + n);
      kernel.size += n;
      kernel.blocks.set(off, n);
      return BigInt(off);
    },
    store_u64(off, v) {
      const d = slice(off, 8);
      if (d) new DataView(d.buffer, d.byteOffset, 8).setBigUint64(0, BigInt.asUintN(64, v), true);
    },
    store_u8(off, v) {
      const d = slice(off, 1);
      if (d) d[0] = v & 0xff;
    },
    input_length() { return BigInt(kernel.input.length); },
    input_load_u8(off) {
      off = Number(off);
      return off < kernel.input.length ? kernel.input[off] : 0;
    },
    input_load_u64(off) {
      off = Number(off);
      if (off + 8 > kernel.input.length) return 0n;
      return new DataView(kernel.input.buffer, kernel.input.byteOffset + off, 8).getBigUint64(0, true);
    },
    output_set(off, n) {
      const d = slice(off, n);
      kernel.output = d ? d.slice() : new Uint8Array(0);
    },
    error_set(off) {
      const d = slice(off, kernel.blocks.get(Number(off)) ?? 0);
      kernel.err = d ? new TextDecoder().decode(d) : 'unknown error';
    },
  };
  return {
    imports: { wasi_snapshot_preview1: wasi, 'extism:host/env': env },
    /** Starts an Extism-style call with input bytes. */
    begin(input) {
      kernel.input = input; kernel.size = 0; kernel.blocks.clear(); kernel.output = null; kernel.err = null;
    },
    /** Ends a call: its output and error (null when none); frees the store. */
    end() {
      const r = { output: kernel.output, error: kernel.err };
      kernel.input = new Uint8Array(0); kernel.size = 0; kernel.blocks.clear(); kernel.memBytes = null;
      return r;
    },
  };
}

function concat(parts) {
  if (parts.length === 1) return parts[0];
  const n = parts.reduce((a, p) => a + p.length, 0);
  const out = new Uint8Array(n);
  let o = 0;
  for (const p of parts) { out.set(p, o); o += p.length; }
  return out;
}
