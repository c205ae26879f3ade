package pebblestore

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// The data directory at open: the errors an operator meets there name the
// problem. Another process holding the directory's lock was "resource
// temporarily unavailable"; a directory of other files (a git checkout, a
// home directory) was adopted silently, Pebble's files written among
// them; a damaged file's error printed its bytes.

// foreignDir refuses a directory that holds files but no Pebble store. A
// Pebble store, even an empty one, has its format-version marker (a file
// "marker.format-version.*", written first) or an OPTIONS file that names
// Pebble; CURRENT and MANIFEST files alone are another store's (LevelDB,
// RocksDB), which Pebble would have taken for its own: it rewrote the
// MANIFEST and deleted the log. LOCK alone (an open stopped before it
// wrote anything) and hidden files are no one's.
func foreignDir(fs vfs.FS, dir string) error {
	names, err := fs.List(dir)
	if err != nil {
		return fmt.Errorf("pebblestore: open %q: %w", dir, err)
	}
	var other string
	for _, n := range names {
		switch {
		case strings.HasPrefix(n, "marker.format-version."):
			return nil // a store
		case strings.HasPrefix(n, "OPTIONS-") && pebbleOptions(fs, fs.PathJoin(dir, n)):
			return nil // a store
		case n == "LOCK", strings.HasPrefix(n, "."), n == "lost+found": // (a fresh file system's)
		case other == "":
			other = n
		}
	}
	if other == "" {
		return nil // empty (or only hidden files): a new store
	}
	return fmt.Errorf("pebblestore: open %q: the directory holds other files (%q among %d) and no Pebble store: give the coordinator a directory of its own (--data)", dir, other, len(names))
}

// pebbleOptions reports whether the file at path is a Pebble OPTIONS file
// (its first 4 KiB name pebble_version; RocksDB's name rocksdb_version).
func pebbleOptions(fs vfs.FS, path string) bool {
	f, err := fs.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	b := make([]byte, 4096)
	n, _ := io.ReadFull(f, b)
	return strings.Contains(string(b[:n]), "pebble_version=")
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
