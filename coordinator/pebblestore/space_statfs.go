//go:build linux || darwin || freebsd || netbsd || openbsd

package pebblestore

import (
	"fmt"
	"syscall"
)

// freeSpace returns the bytes an unprivileged process may still write on
// the file system holding dir (statfs: available blocks times block size).
func freeSpace(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("pebblestore: statfs %s: %w", dir, err)
	}
	return int64(st.Bavail) * int64(st.Bsize), nil //nolint:unconvert // field types differ by platform
}
