package coordinator

import (
	"strings"
	"testing"

	"github.com/edgelimit/edgelimit/coordinator/merge"
	"github.com/edgelimit/edgelimit/coordinator/pebblestore"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Validate reports every problem at once, and Open refuses what it reports.
func TestOptionsValidateReportsEverything(t *testing.T) {
	o := Options{Config: testConfig(), MaxGroup: -1, Merger: merge.MergerOptions{IsolateTTL: -5, CheckpointKeys: -1,
		LeaseLife: 2 * merge.MaxDurationOption, MaxClockSkew: -1}}
	o.EnsureDefaults()
	err := o.Validate()
	for _, want := range []string{"no data directory", "MaxGroup", "IsolateTTL", "CheckpointKeys", "LeaseLife must be positive and at most 1h0m0s", "MaxClockSkew"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v, want it to name %s", err, want)
		}
	}
	if _, err := Open(o); err == nil {
		t.Fatal("Open accepted options Validate refuses")
	}
	o = Options{InMemory: true, Config: testConfig()}
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if o.MaxGroup != DefaultMaxGroup || o.Merger.MaxCachedKeys != merge.DefaultMaxCachedKeys || o.Merger.CheckpointKeys != merge.DefaultCheckpointKeys {
		t.Fatalf("defaults not applied: %+v", o)
	}
	if _, err := pebblestore.Open(nil, t.TempDir()); err == nil {
		t.Fatal("OpenPebble without a file system")
	}
	if _, err := pebblestore.Open(vfs.Default, ""); err == nil {
		t.Fatal("OpenPebble on disk without a directory")
	}
}
