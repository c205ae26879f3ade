package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/coordinator"
	"github.com/edgelimit/edgelimit/coordinator/merge"
)

// stuckStore is a store whose reads wait until release is closed, as an
// open replaying its log waits on a full disk.
type stuckStore struct {
	release chan struct{}
}

func (s stuckStore) Get([]byte) ([]byte, bool, error) { <-s.release; return nil, false, nil }
func (s stuckStore) Commit([]merge.Op) error          { return nil }
func (s stuckStore) Close() error                     { return nil }
func (s stuckStore) Scan(_, _ []byte, _ func(k, v []byte) bool) error {
	<-s.release
	return nil
}

// TestStopWhileOpening: a stop signal (the context's end) ends a start
// whose store's open waits, instead of waiting with it.
func TestStopWhileOpening(t *testing.T) {
	st := stuckStore{release: make(chan struct{})}
	defer close(st.release)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	done := make(chan error, 1)
	go func() {
		_, err := openInterruptibly(ctx, coordinator.Options{Store: st, Config: coordinator.DefaultConfig()})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "stopped while opening") {
			t.Fatalf("err %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stop waited for the open")
	}
}
