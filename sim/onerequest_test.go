package sim

import "testing"

// A sparse isolate refused a request the window cannot cover whole is
// granted none of it (coordinator/merge: oneRequest); an isolate holding
// many requests is still served in part, even one that syncs less than
// four times a window. Here a hot isolate 150 ms away (one batch in
// flight: a sync every 300 ms) holds hundreds of requests at a time: when
// every sparse isolate's ask was taken for one request, it got nothing
// near each window's end: 93.6% utilisation where it reaches 98.2%.
func TestFarHotIsolateServedInPart(t *testing.T) {
	sc, err := LoadScenario("testdata/far-hot-isolate.json")
	if err != nil {
		t.Fatal(err)
	}
	r := runScenario(t, sc, Auto)
	t.Logf("utilisation %.1f%%, stranded %.2f%%, worst window %d over", r.Utilisation, r.StrandedPct, r.WorstOverrun)
	if r.WorstOverrun != 0 || r.Utilisation < 95 {
		t.Errorf("utilisation %.1f%%, %d windows over; want >= 95%%, none over", r.Utilisation, r.OverWindows)
	}
}
