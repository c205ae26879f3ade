//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package pebblestore

import "errors"

// freeSpace cannot read the free space on this platform: the reserve is
// not checked (spaceGuard.check logs it once).
func freeSpace(string) (int64, error) {
	return 0, errors.New("pebblestore: free disk space unknown on this platform")
}
