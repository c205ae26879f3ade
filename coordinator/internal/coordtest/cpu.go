package coordtest

import (
	"syscall"
	"testing"
	"time"
)

// CPUTime returns the CPU time (user and system) the process used so far
// (getrusage): what a measurement costs, less sensitive than wall time to
// other work on the machine.
func CPUTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
