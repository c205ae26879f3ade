package isolate

import (
	"context"
	"encoding/binary"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// kernel is the state behind the Extism kernel imports for one call of an
// Extism-style export: the input, the host-side memory blocks the guest
// allocates, the output and the error. Offsets given to the guest are
// 1-based positions in mem (0 means "none" to go-pdk).
type kernel struct {
	input  []byte
	mem    []byte
	blocks map[uint64]uint64 // offset -> length
	output []byte
	err    string
	failed bool
}

// maxKernelMem bounds what one Extism-style call may allocate host-side (bytes).
const maxKernelMem = 64 << 20

type kernelKey struct{}

func kernelFrom(ctx context.Context) *kernel {
	k, _ := ctx.Value(kernelKey{}).(*kernel)
	if k == nil {
		// Called outside CallExtism: give the guest an empty kernel.
		return &kernel{blocks: map[uint64]uint64{}}
	}
	return k
}

func (k *kernel) slice(off, n uint64) []byte {
	if off == 0 || off-1+n > uint64(len(k.mem)) || off-1+n < off-1 {
		return nil
	}
	return k.mem[off-1 : off-1+n]
}

// instantiateKernel registers "extism:host/env" in rt.
func instantiateKernel(ctx context.Context, rt wazero.Runtime) error {
	i64, i32 := api.ValueTypeI64, api.ValueTypeI32
	b := rt.NewHostModuleBuilder("extism:host/env")
	fn := func(name string, f api.GoModuleFunc, params, results []api.ValueType) {
		b.NewFunctionBuilder().WithGoModuleFunction(f, params, results).Export(name)
	}
	fn("alloc", func(ctx context.Context, _ api.Module, s []uint64) {
		k := kernelFrom(ctx)
		n := s[0]
		if n > maxKernelMem || uint64(len(k.mem))+n > maxKernelMem {
			s[0] = 0
			return
		}
		off := uint64(len(k.mem)) + 1
		k.mem = append(k.mem, make([]byte, n)...)
		k.blocks[off] = n
		s[0] = off
	}, []api.ValueType{i64}, []api.ValueType{i64})
	fn("store_u64", func(ctx context.Context, _ api.Module, s []uint64) {
		if d := kernelFrom(ctx).slice(s[0], 8); d != nil {
			binary.LittleEndian.PutUint64(d, s[1])
		}
	}, []api.ValueType{i64, i64}, nil)
	fn("store_u8", func(ctx context.Context, _ api.Module, s []uint64) {
		if d := kernelFrom(ctx).slice(s[0], 1); d != nil {
			d[0] = byte(s[1])
		}
	}, []api.ValueType{i64, i32}, nil)
	fn("input_length", func(ctx context.Context, _ api.Module, s []uint64) {
		s[0] = uint64(len(kernelFrom(ctx).input))
	}, nil, []api.ValueType{i64})
	fn("input_load_u8", func(ctx context.Context, _ api.Module, s []uint64) {
		in := kernelFrom(ctx).input
		if s[0] < uint64(len(in)) {
			s[0] = uint64(in[s[0]])
		} else {
			s[0] = 0
		}
	}, []api.ValueType{i64}, []api.ValueType{i32})
	fn("input_load_u64", func(ctx context.Context, _ api.Module, s []uint64) {
		in := kernelFrom(ctx).input
		if s[0]+8 <= uint64(len(in)) && s[0]+8 > s[0] {
			s[0] = binary.LittleEndian.Uint64(in[s[0]:])
		} else {
			s[0] = 0
		}
	}, []api.ValueType{i64}, []api.ValueType{i64})
	fn("output_set", func(ctx context.Context, _ api.Module, s []uint64) {
		k := kernelFrom(ctx)
		k.output = append([]byte(nil), k.slice(s[0], s[1])...)
	}, []api.ValueType{i64, i64}, nil)
	fn("error_set", func(ctx context.Context, _ api.Module, s []uint64) {
		k := kernelFrom(ctx)
		k.failed = true
		k.err = string(k.slice(s[0], k.blocks[s[0]]))
	}, []api.ValueType{i64}, nil)
	_, err := b.Instantiate(ctx)
	return err
}
