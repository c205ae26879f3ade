package sim

import "testing"

// servedAtLeast runs the scenario file path (testdata) with auto and fails
// t unless no window went over and utilisation is at least minUtil (%).
func servedAtLeast(t *testing.T, path string, minUtil float64) {
	t.Helper()
	sc, err := LoadScenario(path)
	if err != nil {
		t.Fatal(err)
	}
	r := runScenario(t, sc, Auto)
	t.Logf("utilisation %.1f%%, stranded %.2f%%, worst window %d over", r.Utilisation, r.StrandedPct, r.WorstOverrun)
	if r.WorstOverrun != 0 || r.Utilisation < minUtil {
		t.Errorf("utilisation %.1f%%, %d windows over; want >= %.0f%%, none over", r.Utilisation, r.OverWindows, minUtil)
	}
}

// A sparse isolate refused a request the window cannot cover whole is
// granted none of it (coordinator/merge: oneRequest); an isolate holding
// many requests is still served in part, even one that syncs less than
// four times a window. Here a hot isolate 150 ms away (one batch in
// flight: a sync every 300 ms) holds hundreds of requests at a time: when
// every sparse isolate's ask was taken for one request, it got nothing
// near each window's end: 91.5% utilisation where it reaches 98.5%.
func TestFarHotIsolateServedInPart(t *testing.T) {
	servedAtLeast(t, "testdata/far-hot-isolate.json", 95)
}

// An amendment answered on a full window tells its isolate the window is
// exhausted only where its next batch would ask in that window again: with
// windows about a round trip long the next ask reaches the next window,
// which has room. Told exhausted there too, the isolates denied what they
// held and reached 91.0% where they reach 96.3%.
func TestRoundTripWindowServed(t *testing.T) {
	servedAtLeast(t, "testdata/round-trip-window.json", 94)
}
