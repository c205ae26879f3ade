package redisstore

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// An outage ends only after Redis answered for outageQuiet without a
// failed round trip: answers of the healthy masters between one master's
// failures do not end it, so it is logged and counted once.
func TestOutageLoggedOnce(t *testing.T) {
	var buf bytes.Buffer
	o := &outage{log: slog.New(slog.NewTextHandler(&buf, nil)), stats: &stats{}}
	for range 5 {
		o.failed("write", errors.New("connection refused"))
		o.succeeded() // another master answers
	}
	if got := o.stats.outages.Load(); got != 1 {
		t.Errorf("%d outages counted for one run of failures, want 1", got)
	}
	if n := strings.Count(buf.String(), "Redis answers again"); n != 0 {
		t.Errorf("the outage ended %d times while round trips still failed", n)
	}
	o.mu.Lock()
	o.last = time.Now().Add(-outageQuiet) // a second without a failure
	o.mu.Unlock()
	o.succeeded()
	text := buf.String()
	if strings.Count(text, "Redis unavailable") != 1 || strings.Count(text, "Redis answers again") != 1 {
		t.Errorf("logs: %s; want the outage once and its end once", text)
	}
}
