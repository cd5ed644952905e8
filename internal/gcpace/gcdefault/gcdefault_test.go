package gcdefault

import (
	"runtime/debug"
	"testing"
)

// TestDefaultChangesNothingUnlessRecorded: a program that never imported
// gcpace keeps its pace; after Record, Default restores the recorded
// percent, once.
func TestDefaultChangesNothingUnlessRecorded(t *testing.T) {
	before := debug.SetGCPercent(250)
	defer debug.SetGCPercent(before)
	Default()
	if p := debug.SetGCPercent(250); p != 250 {
		t.Fatalf("Default without a Record set the percent to %d", p)
	}
	Record(150)
	Default()
	if p := debug.SetGCPercent(300); p != 150 {
		t.Fatalf("after Record(150) and Default the percent is %d", p)
	}
	Default()
	if p := debug.SetGCPercent(300); p != 300 {
		t.Fatalf("a second Default changed the percent to %d", p)
	}
}
