package launch

import (
	"bytes"
	"strings"
	"testing"
)

// TestProgressOnATerminalAndPiped: piped, each state is printed once, as
// plain lines; on a terminal the first line turns in place and the detail
// lines are printed when they change.
func TestProgressOnATerminalAndPiped(t *testing.T) {
	var piped bytes.Buffer
	sp := newSpinner(&Session{Out: &piped})
	sp.show([]string{"RayCluster x: starting", "2 trainer pods Pending: not enough nvidia.com/gpu on 3 of 3 nodes"})
	sp.show([]string{"RayCluster x: starting", "2 trainer pods Pending: not enough nvidia.com/gpu on 3 of 3 nodes"})
	sp.show([]string{"RayCluster x: ready"})
	if got, want := piped.String(), "RayCluster x: starting\n2 trainer pods Pending: not enough nvidia.com/gpu on 3 of 3 nodes\nRayCluster x: ready\n"; got != want {
		t.Errorf("piped:\n%q\nwant\n%q", got, want)
	}
	if strings.Contains(piped.String(), "\r") || strings.Contains(piped.String(), "\033") {
		t.Error("piped output holds terminal control characters")
	}

	var tty bytes.Buffer
	sp = newSpinner(&Session{Out: &tty, Terminal: true})
	sp.show([]string{"RayCluster x: starting", "1 head running"})
	sp.show([]string{"RayCluster x: starting", "1 head running"})
	sp.done()
	got := tty.String()
	if strings.Count(got, "1 head running") != 1 || strings.Count(got, "RayCluster x: starting") != 2 || !strings.Contains(got, "\r\033[K") {
		t.Errorf("terminal output %q", got)
	}
	if !strings.HasSuffix(got, "\r\033[K") {
		t.Errorf("done does not clear the turning line: %q", got)
	}
}
