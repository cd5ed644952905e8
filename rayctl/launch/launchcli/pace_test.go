package launchcli

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"gridweave.dev/internal/gcpace/gcdefault"
)

// Lint counts its input over every file: the pace goes back to the
// default only once all of it, together, passes largeInput.
func TestLargeInputGoesBackToTheDefaultPace(t *testing.T) {
	calls := 0
	read := &inputBytes{large: func() { calls++ }}
	chunk := bytes.Repeat([]byte("x"), largeInput/2)
	for i, wantCalls := range []int{0, 0, 1} {
		if _, err := io.Copy(io.Discard, read.counting(bytes.NewReader(chunk))); err != nil {
			t.Fatal(err)
		}
		if i == 2 && calls == 0 || i < 2 && calls != 0 {
			t.Fatalf("after %d bytes in %d readers: %d calls, want %d or more", read.n.Load(), i+1, calls, wantCalls)
		}
	}
}

// The commands that wait on a cluster, or follow logs, run at the default
// pace; the offline ones, help and usage at the short-command pace.
func TestLiveCommandsRunAtTheDefaultPace(t *testing.T) {
	calls := 0
	defaultPace = func() { calls++ }
	t.Cleanup(func() { defaultPace = gcdefault.Default })
	for _, c := range []struct {
		args []string
		live bool
	}{
		{[]string{"run", "r.yaml", "i.yaml"}, true},
		{[]string{"--kubeconfig", "/k", "-n", "ns", "logs", "--follow", "x"}, true},
		{[]string{"cluster", "up", "r.yaml", "i.yaml"}, true},
		{[]string{"job", "list", "x"}, true},
		{[]string{"dev", "r.yaml", "i.yaml"}, true},
		{[]string{"status", "x"}, true},
		{[]string{"doctor", "r.yaml", "i.yaml"}, true},
		{[]string{"lint", "-o", "json", "a.yaml"}, false},
		{[]string{"check", "r.yaml", "i.yaml"}, false},
		{[]string{"render", "r.yaml", "i.yaml", "-o", "out"}, false},
		{[]string{"chart", "render", "values.yaml"}, false},
		{[]string{"--help"}, false},
		{[]string{"help", "run"}, false},
		{nil, false},
		{[]string{"no-such-command"}, false},
	} {
		calls = 0
		paceFor(New(nil, io.Discard, io.Discard), c.args)
		if live := calls > 0; live != c.live {
			t.Errorf("launcher %s: default pace %t, want %t", strings.Join(c.args, " "), live, c.live)
		}
	}
}

// The short commands run without a collection; lint of a file over
// largeInput collects at the default pace.
func TestShortCommandsRunWithoutACollection(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the launcher; run make test")
	}
	bin := builtLauncher(t)
	dir := t.TempDir()
	small := filepath.Join(dir, "raycluster.yaml")
	if err := os.WriteFile(small, []byte(smallRayCluster), 0o644); err != nil {
		t.Fatal(err)
	}
	var large strings.Builder
	for i := 0; large.Len() <= 2*largeInput; i++ {
		large.WriteString("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-" + strings.Repeat("x", 20) + "\ndata:\n  key: " + strings.Repeat("v", 200) + "\n")
	}
	largeFile := filepath.Join(dir, "large.yaml")
	if err := os.WriteFile(largeFile, []byte(large.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	gctrace := func(args ...string) string {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(environWithout("GOGC", "GODEBUG"), "GODEBUG=gctrace=1")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("launcher %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		var gcs []string
		for _, line := range strings.Split(stderr.String(), "\n") {
			if strings.HasPrefix(line, "gc ") {
				gcs = append(gcs, line)
			}
		}
		return strings.Join(gcs, "\n")
	}
	for _, args := range [][]string{{"--help"}, {"lint", small}, {"check", filepath.Join(specs, "grpo_swe.recipe.yaml"), filepath.Join(specs, "grpo_swe.infra.yaml")}} {
		if gcs := gctrace(args...); gcs != "" {
			t.Errorf("launcher %s collected:\n%s", strings.Join(args, " "), gcs)
		}
	}
	// Each collection's goal follows from the live heap the one before
	// left: at the default pace max(4 MB, twice it); at
	// gcpace.ShortCommand, max(32 MB, nine times).
	// A collection still running when the command exits leaves its
	// line cut short ("gc 19 @1.062s 11%: "): only whole lines count.
	var gcs []string
	for _, line := range strings.Split(gctrace("lint", largeFile), "\n") {
		if heapGoal.MatchString(line) {
			gcs = append(gcs, line)
		}
	}
	if len(gcs) < 2 {
		t.Fatalf("lint of %d bytes collected %d times (whole lines), want a few", large.Len(), len(gcs))
	}
	before, last := heapGoal.FindStringSubmatch(gcs[len(gcs)-2]), heapGoal.FindStringSubmatch(gcs[len(gcs)-1])
	live, _ := strconv.Atoi(before[1])
	goal, _ := strconv.Atoi(last[2])
	if goal >= max(32, 4*live) {
		t.Errorf("lint of %d bytes ends collecting at a goal of %d MB after %d MB live, not the default pace's:\n%s\n%s", large.Len(), goal, live, gcs[len(gcs)-2], gcs[len(gcs)-1])
	}
}

// heapGoal is the live heap and the next goal in a gctrace line
// ("4->5->2 MB, 5 MB goal").
var heapGoal = regexp.MustCompile(`->(\d+) MB, (\d+) MB goal`)

func environWithout(names ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.Contains(" "+strings.Join(names, " ")+" ", " "+name+" ") {
			env = append(env, kv)
		}
	}
	return env
}
