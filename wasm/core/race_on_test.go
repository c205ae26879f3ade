//go:build race

package core_test

// raceEnabled reports whether the tests run under the race detector, which
// makes the large flood about ten times slower.
const raceEnabled = true
