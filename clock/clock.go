// Package clock is the one clock abstraction of edgelimit's Go processes:
// the coordinator, its commit throttling, the edge host and the sync loop
// read the time and wait through a Clock, so tests drive them with Manual.
// Times are int64 nanoseconds (Unix time for Real), as everywhere on the
// wire; durations given to a Clock are nanoseconds too.
package clock

import (
	"sort"
	"sync"
	"time"
)

// Clock reads the time and waits. Implementations must be safe for
// concurrent use (a coordinator reads it from several goroutines).
type Clock interface {
	// Now returns the current time, ns.
	Now() int64
	// After returns a channel that receives once d ns have passed.
	After(d int64) <-chan struct{}
}

// Real is the wall clock.
var Real Clock = realClock{}

type realClock struct{}

func (realClock) Now() int64 { return time.Now().UnixNano() }

func (realClock) After(d int64) <-chan struct{} {
	ch := make(chan struct{}, 1)
	time.AfterFunc(time.Duration(d), func() { ch <- struct{}{} })
	return ch
}

// Manual is a Clock that moves only when told (Set, Advance): timers fire
// when the time passes their deadline. It is safe for concurrent use.
type Manual struct {
	mu     sync.Mutex
	t      int64
	timers []timer
}

type timer struct {
	at int64
	ch chan struct{}
}

// NewManual returns a Manual clock at t (ns).
func NewManual(t int64) *Manual { return &Manual{t: t} }

// Now returns the clock's time, ns.
func (m *Manual) Now() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.t
}

// After returns a channel that receives once the clock has moved d ns on.
func (m *Manual) After(d int64) <-chan struct{} {
	ch := make(chan struct{}, 1)
	m.mu.Lock()
	defer m.mu.Unlock()
	if d <= 0 {
		ch <- struct{}{}
		return ch
	}
	m.timers = append(m.timers, timer{m.t + d, ch})
	return ch
}

// Advance moves the clock d ns on and fires the timers that are due.
func (m *Manual) Advance(d int64) { m.Set(m.Now() + d) }

// Set moves the clock to t (never back) and fires the timers that are due,
// earliest first.
func (m *Manual) Set(t int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t > m.t {
		m.t = t
	}
	sort.Slice(m.timers, func(i, j int) bool { return m.timers[i].at < m.timers[j].at })
	n := 0
	for _, tm := range m.timers {
		if tm.at <= m.t {
			tm.ch <- struct{}{}
			continue
		}
		m.timers[n] = tm
		n++
	}
	m.timers = m.timers[:n]
}

// Func adapts a function returning the time in ns to a Clock whose waits
// run on the real clock (for code that only reads the time).
type Func func() int64

// Now returns f().
func (f Func) Now() int64 { return f() }

// After waits d ns of real time.
func (f Func) After(d int64) <-chan struct{} { return Real.After(d) }
