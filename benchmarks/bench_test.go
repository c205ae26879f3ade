package benchmarks

import "testing"

func BenchmarkDecideWazeroHotKey(b *testing.B)   { decideWazero(b, 1) }
func BenchmarkDecideWazero100kKeys(b *testing.B) { decideWazero(b, 100_000) }
func BenchmarkDecideNativeHotKey(b *testing.B)   { decideNative(b, 1) }
func BenchmarkXTimeRateAllowN(b *testing.B)      { xrate(b) }
func BenchmarkDecideExtismSDK(b *testing.B)      { decideExtismSDK(b) }
func BenchmarkInstantiate(b *testing.B)          { instantiate(b) }
func BenchmarkCompile(b *testing.B)              { compile(b) }
