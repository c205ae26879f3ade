package pebblestore

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// The errors of an open name the problem: a directory of other files is
// refused (it was adopted, Pebble's files written among them), a second
// open of a directory in use says another process holds it ("resource
// temporarily unavailable" before; here the same process, which Pebble
// tells apart), a damaged OPTIONS file says the store is damaged and what
// to do.
func TestOpenErrorsNameTheProblem(t *testing.T) {
	foreign := t.TempDir()
	if err := os.WriteFile(filepath.Join(foreign, "README.md"), []byte("# a project\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err := Open(vfs.Default, foreign); err == nil {
		s.Close()
		t.Error("a directory of other files opened as a store")
	} else if !strings.Contains(err.Error(), "holds other files") || !strings.Contains(err.Error(), "README.md") {
		t.Errorf("a directory of other files: %v", err)
	}
	if ents, _ := os.ReadDir(foreign); len(ents) != 1 {
		t.Errorf("the refused directory now holds %d files, want its 1", len(ents))
	}
	// Another store's files (LevelDB's CURRENT, MANIFEST and log): not a
	// Pebble store. Pebble took them for its own, rewrote the MANIFEST
	// and deleted the log.
	leveldb := t.TempDir()
	files := map[string]string{"CURRENT": "MANIFEST-000001\n", "MANIFEST-000001": strings.Repeat("\x01", 300), "000003.log": "entries", "LOG": "leveldb"}
	for n, b := range files {
		if err := os.WriteFile(filepath.Join(leveldb, n), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if s, err := Open(vfs.Default, leveldb); err == nil {
		s.Close()
		t.Error("a LevelDB directory opened as a store")
	} else if !strings.Contains(err.Error(), "no Pebble store") {
		t.Errorf("a LevelDB directory: %v", err)
	}
	for n, b := range files {
		if got, err := os.ReadFile(filepath.Join(leveldb, n)); err != nil || string(got) != b {
			t.Errorf("the refused directory's %s: %d bytes, %v; want it untouched", n, len(got), err)
		}
	}

	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "lost+found"), 0o700); err != nil {
		t.Fatal(err)
	}
	s, err := Open(vfs.Default, dir) // a fresh file system's directory
	if err != nil {
		t.Fatal(err)
	}
	if s2, err := Open(vfs.Default, dir); err == nil {
		s2.Close()
		t.Error("a directory in use opened twice")
	} else if !strings.Contains(err.Error(), "another process holds the directory's lock") {
		t.Errorf("a directory in use: %v", err)
	}
	s.Close()

	opts, _ := filepath.Glob(filepath.Join(dir, "OPTIONS-*"))
	if len(opts) == 0 {
		t.Fatal("no OPTIONS file")
	}
	if err := os.WriteFile(opts[0], []byte("[Options]\n%G/np\xaf\x01\x02\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err := Open(vfs.Default, dir); err == nil {
		s.Close()
		t.Error("a damaged OPTIONS file opened")
	} else if msg := err.Error(); !strings.Contains(msg, "damaged") {
		t.Errorf("a damaged OPTIONS file: %q", msg)
	}
}

// TestLockHeldByAnotherProcess: a directory another process has open is
// refused naming the lock (it said "resource temporarily unavailable").
// The test runs itself as that other process.
func TestLockHeldByAnotherProcess(t *testing.T) {
	if dir := os.Getenv("PEBBLESTORE_HOLD"); dir != "" {
		s, err := Open(vfs.Default, dir)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		os.Stdout.WriteString("held\n")
		io.Copy(io.Discard, os.Stdin) // until the parent closes it
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockHeldByAnotherProcess$")
	cmd.Env = append(os.Environ(), "PEBBLESTORE_HOLD="+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "held\n" {
		t.Fatalf("the other process: %q %v", line, err)
	}
	if s, err := Open(vfs.Default, dir); err == nil {
		s.Close()
		t.Error("a directory another process holds opened")
	} else if !strings.Contains(err.Error(), "another process holds the directory's lock") {
		t.Errorf("a directory another process holds: %v", err)
	}
}
