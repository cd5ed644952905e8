package gcpace

import (
	"os"
	"os/exec"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
)

// percent reads the collector's percent without changing it.
func percent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// The test binary initialised this package: without GOGC the collector
// runs at ShortCommand until Default, then at the default 100; with GOGC
// set, at the user's percent throughout. Each case runs in a fresh test
// process, since the pace is set once, at initialisation.
func TestPace(t *testing.T) {
	if mode := os.Getenv("GCPACE_TEST_CASE"); mode != "" {
		before := percent()
		Default()
		Default()
		t.Logf("before=%d after=%d", before, percent())
		return
	}
	for _, c := range []struct {
		env  []string
		want string
	}{
		{nil, "before=" + strconv.Itoa(ShortCommand) + " after=100"},
		{[]string{"GOGC=50"}, "before=50 after=50"},
		{[]string{"GOGC=off"}, "before=-1 after=-1"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestPace$", "-test.v", "-test.count=1")
		cmd.Env = append(environWithout("GOGC"), append(c.env, "GCPACE_TEST_CASE=1")...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", c.env, err, out)
		}
		if !strings.Contains(string(out), c.want) {
			t.Errorf("%v: want %q in\n%s", c.env, c.want, out)
		}
	}
}

func environWithout(name string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, name+"=") {
			env = append(env, kv)
		}
	}
	return env
}
