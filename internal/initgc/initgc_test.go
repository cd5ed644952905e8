package initgc

import (
	"os"
	"os/exec"
	"runtime/debug"
	"strconv"
	"testing"
)

// The test binary initialised this package, so the collector is off until
// Resume. Run again with GOGC set, the collector resumes at the user's
// setting, not a default.
func TestResumeRestoresTheStartingSetting(t *testing.T) {
	want := 100
	if gogc := os.Getenv("GOGC"); gogc != "" {
		n, err := strconv.Atoi(gogc)
		if err != nil {
			t.Fatalf("GOGC=%q", gogc)
		}
		want = n
	}
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Fatalf("during initialisation and before Resume the GC percent is %d, want -1 (off)", got)
	}
	Resume()
	if got := debug.SetGCPercent(want); got != want {
		t.Fatalf("after Resume the GC percent is %d, want %d", got, want)
	}
	Resume()
	if got := debug.SetGCPercent(want); got != want {
		t.Fatalf("after a second Resume the GC percent is %d, want %d", got, want)
	}
	if os.Getenv("GOGC") != "" {
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestResumeRestoresTheStartingSetting$")
	cmd.Env = append(os.Environ(), "GOGC=37")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("with GOGC=37: %v\n%s", err, out)
	}
}
