// Package proccpu reads the CPU time a process has used (Linux /proc),
// for the measurements that compare the CPU cost of the coordinator and
// of the Redis processes per delta.
package proccpu

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of /proc/PID/stat's times: USER_HZ, 100 on Linux.
const clockTick = 10 * time.Millisecond

// Of returns the user plus system CPU time process pid has used so far
// (utime + stime of /proc/PID/stat, 10 ms resolution).
func Of(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("proccpu: %w", err)
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// the fields after it start past the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("proccpu: /proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("proccpu: /proc/%d/stat: %d fields", pid, len(f)+2)
	}
	var total time.Duration
	for _, v := range f[11:13] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("proccpu: /proc/%d/stat: %w", pid, err)
		}
		total += time.Duration(n) * clockTick
	}
	return total, nil
}
