package coordtest

import (
	"os"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// DiskFull is a file system for Pebble (another one under Pebble's errorfs)
// whose table writes fail with ENOSPC while Full is set, as on a full disk
// whose WAL still has room (Pebble preallocates it): commits succeed, flushes
// and compactions fail. It counts the tables Pebble starts while full
// (Attempts: flush and compaction attempts).
type DiskFull struct {
	FS   vfs.FS // the file system with the failures injected: give it to pebblestore.Open
	Full atomic.Bool

	attempts atomic.Int64
}

// NewDiskFull returns a DiskFull over fs (vfs.Default, vfs.NewMem()) with
// room (Full unset).
func NewDiskFull(fs vfs.FS) *DiskFull {
	d := &DiskFull{}
	d.FS = errorfs.Wrap(fs, errorfs.InjectorFunc(d.inject))
	return d
}

// Attempts returns how many tables Pebble started while Full was set.
func (d *DiskFull) Attempts() int64 { return d.attempts.Load() }

func (d *DiskFull) inject(op errorfs.Op) error {
	if !d.Full.Load() || !(strings.HasSuffix(op.Path, ".sst") || strings.HasSuffix(op.Path, ".blob")) {
		return nil
	}
	switch op.Kind {
	case errorfs.OpCreate:
		d.attempts.Add(1)
	case errorfs.OpFileWrite, errorfs.OpFileWriteAt, errorfs.OpFilePreallocate, errorfs.OpFileSync,
		errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
		return &os.PathError{Op: "write", Path: op.Path, Err: syscall.ENOSPC}
	}
	return nil
}
