package isolate

import (
	"context"
	"fmt"

	"github.com/edgelimit/edgelimit/wasm"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// Options configure a Runtime. The zero value is valid.
type Options struct {
	// Module is the WebAssembly binary to run; nil means the embedded
	// edgelimit module (wasm.Module).
	Module []byte
	// MemoryLimitPages caps each isolate's linear memory, in 64 KiB pages.
	// 0 means DefaultMemoryLimitPages (4096 pages, 256 MiB), enough for the
	// default cap of 100,000 keys of up to 256 bytes.
	MemoryLimitPages uint32
	// Interpreter runs the module in wazero's interpreter instead of
	// compiling it to machine code (slower; for platforms without the
	// compiler).
	Interpreter bool
}

// DefaultMemoryLimitPages is the default per-isolate memory cap, in 64 KiB pages (256 MiB):
// an isolate holding its default max_keys (100,000) distinct keys of the longest length
// (256 bytes) with upstream records needs it, as the module's allocator doubles its heap
// (with 64 MiB the module ran out of memory and trapped at key 87,011 deciding and 49,152
// observing, with 128 MiB at 98,304 observing; TestLongestKeysFitTheMemoryCap). A cap, not a
// reservation: memory grows as used (32 MiB for 100,000 keys of 32 bytes).
const DefaultMemoryLimitPages = 4096

// Runtime holds the compiled module; isolates are instantiated from it.
// It is safe for concurrent use; each Isolate is not.
type Runtime struct {
	rt       wazero.Runtime
	compiled wazero.CompiledModule
}

// NewRuntime compiles the module once.
func NewRuntime(ctx context.Context, opts Options) (*Runtime, error) {
	if opts.Module == nil {
		opts.Module = wasm.Module
	}
	if opts.MemoryLimitPages == 0 {
		opts.MemoryLimitPages = DefaultMemoryLimitPages
	}
	cfg := wazero.NewRuntimeConfig()
	if opts.Interpreter {
		cfg = wazero.NewRuntimeConfigInterpreter()
	}
	cfg = cfg.WithMemoryLimitPages(opts.MemoryLimitPages).WithCloseOnContextDone(false)
	rt := wazero.NewRuntimeWithConfig(ctx, cfg)
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		rt.Close(ctx)
		return nil, fmt.Errorf("isolate: wasi: %w", err)
	}
	if err := instantiateKernel(ctx, rt); err != nil {
		rt.Close(ctx)
		return nil, fmt.Errorf("isolate: extism kernel: %w", err)
	}
	compiled, err := rt.CompileModule(ctx, opts.Module)
	if err != nil {
		rt.Close(ctx)
		return nil, fmt.Errorf("isolate: compile module: %w", err)
	}
	return &Runtime{rt: rt, compiled: compiled}, nil
}

// Close releases the runtime and every isolate instantiated from it.
func (r *Runtime) Close(ctx context.Context) error {
	if err := r.rt.Close(ctx); err != nil {
		return fmt.Errorf("isolate: close runtime: %w", err)
	}
	return nil
}
