package pebblestore

import (
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// The data directory at open: the errors an operator meets there name the
// problem. Another process holding the directory's lock was "resource
// temporarily unavailable"; a directory of other files (a git checkout, a
// home directory) was adopted silently, Pebble's files written among
// them; a damaged file's error printed its bytes.

// foreignDir refuses a directory that holds files but no Pebble store: no
// CURRENT, MANIFEST or OPTIONS file (a store, even an empty one, always
// has its marker and manifest).
func foreignDir(fs vfs.FS, dir string) error {
	names, err := fs.List(dir)
	if err != nil {
		return fmt.Errorf("pebblestore: open %q: %w", dir, err)
	}
	var other string
	for _, n := range names {
		switch {
		case n == "CURRENT", n == "LOCK", strings.HasPrefix(n, "MANIFEST-"), strings.HasPrefix(n, "OPTIONS-"),
			strings.HasPrefix(n, "marker."):
			return nil // a store
		case other == "" && !strings.HasPrefix(n, ".") && n != "lost+found": // (a fresh file system's)
			other = n
		}
	}
	if other == "" {
		return nil // empty (or only hidden files): a new store
	}
	return fmt.Errorf("pebblestore: open %q: the directory holds other files (%q among %d) and no store: give the coordinator a directory of its own (--data)", dir, other, len(names))
}

// openError wraps an error of pebble.Open in dir with what it means.
func openError(dir string, err error) error {
	msg := err.Error()
	switch {
	case errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EWOULDBLOCK) || strings.Contains(msg, "lock held by current process"):
		return fmt.Errorf("pebblestore: open %q: another process holds the directory's lock (a coordinator already runs on it? one process per data directory): %w", dir, err)
	case strings.Contains(msg, "invalid key=value syntax") || strings.Contains(msg, "corrupt") ||
		strings.Contains(msg, "unexpected EOF") || strings.Contains(msg, "checksum"):
		return fmt.Errorf("pebblestore: open %q: a file of the store is damaged: restore the directory from a backup, or move it away to start empty: %w", dir, err)
	}
	return fmt.Errorf("pebblestore: open %q: %w", dir, err)
}
