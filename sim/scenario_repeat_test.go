package sim

import (
	"strings"
	"testing"
)

// A scenario that gives a field twice is refused naming it (the last copy
// was taken: "isolates" 64 then 4 ran 4).
func TestScenarioFieldGivenTwice(t *testing.T) {
	_, err := ParseScenario([]byte(`{"name": "x", "isolates": 64, "isolates": 4}`), "")
	if err == nil || !strings.Contains(err.Error(), `"isolates" is given twice`) {
		t.Fatalf("%v, want the repeated field named", err)
	}
}
