package core

import (
	"testing"
	"unsafe"
)

// TestLayoutSizes keeps the sizes Stats counts in step with the structs,
// and the entry small: the memory of 100,000 keys is mostly entries (see
// edge/isolate TestMemoryOf100kKeys). The structs have fixed-size fields
// only, so their sizes are the same natively and on wasm32.
func TestLayoutSizes(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"entry", unsafe.Sizeof(entry{}), entrySize},
		{"leaseRec", unsafe.Sizeof(leaseRec{}), leaseSize},
		{"rateRec", unsafe.Sizeof(rateRec{}), rateSize},
	} {
		if c.got != c.want {
			t.Errorf("unsafe.Sizeof(%s{}) = %d, the constant says %d", c.name, c.got, c.want)
		}
	}
}
