package benchgoals

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Figure is one measured value and the goal it is held to.
type Figure struct {
	What  string
	Value float64
	Unit  string
	// Goal says the bound in words ("≥ 1000"); empty for a figure with
	// no goal, reported for comparison.
	Goal string
	Met  bool
}

// Goal is one measurement: Run returns its figures.
type Goal struct {
	Name string
	// Command is how a person runs the measurement alone.
	Command string
	// Root: it needs root (network namespaces, WireGuard devices).
	Root bool
	// Short: in the quick subset (make bench-short).
	Short bool
	Run   func(ctx context.Context, r *Runner) ([]Figure, error)
}

// Runner runs goals from the module's root directory.
type Runner struct {
	// Dir is the module root.
	Dir string
	// Log receives the commands run and their output's tail on failure.
	Log io.Writer

	// gpuJoins is the GPU join rate on the in-memory mesh, once measured:
	// the wireguard-go run is held to a share of it.
	gpuJoins float64
}

// Outcome is a goal's figures, or why it did not run.
type Outcome struct {
	Goal    Goal
	Figures []Figure
	Err     error
	Took    time.Duration
}

var errNeedsRoot = errors.New("needs root")

// RunAll runs goals in order (those needing root only as root) and
// returns their outcomes.
func (r *Runner) RunAll(ctx context.Context, goals []Goal) []Outcome {
	var out []Outcome
	for _, g := range goals {
		start := time.Now()
		o := Outcome{Goal: g}
		if g.Root && os.Geteuid() != 0 {
			o.Err = errNeedsRoot
		} else {
			fmt.Fprintf(r.Log, "benchgoals: %s: %s\n", g.Name, g.Command)
			o.Figures, o.Err = g.Run(ctx, r)
		}
		o.Took = time.Since(start)
		out = append(out, o)
	}
	return out
}

// Table writes the outcomes as a Markdown table: figure, goal, met.
func Table(w io.Writer, outcomes []Outcome) {
	fmt.Fprintln(w, "| measurement | figure | goal | met |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for _, o := range outcomes {
		if o.Err != nil {
			fmt.Fprintf(w, "| %s | not measured: %v | | |\n", o.Goal.Name, o.Err)
			continue
		}
		for _, f := range o.Figures {
			met := "—"
			if f.Goal != "" {
				met = map[bool]string{true: "yes", false: "**no**"}[f.Met]
			}
			fmt.Fprintf(w, "| %s: %s | %s %s | %s | %s |\n", o.Goal.Name, f.What, format(f.Value), f.Unit, f.Goal, met)
		}
	}
}

func format(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

// AtLeast is a figure held to value ≥ goal.
func AtLeast(what string, value float64, unit string, goal float64) Figure {
	return Figure{What: what, Value: value, Unit: unit, Goal: "≥ " + format(goal), Met: value >= goal}
}

// AtMost is a figure held to value ≤ goal.
func AtMost(what string, value float64, unit string, goal float64) Figure {
	return Figure{What: what, Value: value, Unit: unit, Goal: "≤ " + format(goal), Met: value <= goal}
}

// Bench runs `go test -run '^$' -bench pattern -benchtime benchtime pkg`
// and returns each benchmark's metrics by name (without the -N suffix),
// e.g. m["BenchmarkX/sub"]["joins/s"].
func (r *Runner) Bench(ctx context.Context, pkg, pattern, benchtime string) (map[string]map[string]float64, error) {
	args := []string{"test", "-count=1", "-run", "^$", "-bench", pattern, "-benchtime", benchtime, "-timeout", "60m", pkg}
	out, err := r.run(ctx, "go", args...)
	if err != nil {
		return nil, err
	}
	return ParseBench(out), nil
}

// run runs a command in the module root and returns its output.
func (r *Runner) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = r.Dir
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, tail(buf.String(), 3000))
	}
	return buf.Bytes(), nil
}

var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(-\d+)?\s+\d+\s+(.*)$`)

// ParseBench reads `go test -bench` output: per benchmark, each
// "value unit" pair of its result line.
func ParseBench(out []byte) map[string]map[string]float64 {
	res := map[string]map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := benchLine.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		metrics := map[string]float64{}
		fields := strings.Fields(m[3])
		for i := 0; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				continue
			}
			metrics[fields[i+1]] = v
		}
		res[m[1]] = metrics
	}
	return res
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// metric returns res[bench][unit], or an error naming what is missing.
func metric(res map[string]map[string]float64, bench, unit string) (float64, error) {
	m, ok := res[bench]
	if !ok {
		var names []string
		for n := range res {
			names = append(names, n)
		}
		return 0, fmt.Errorf("no result of %s (have %v)", bench, names)
	}
	v, ok := m[unit]
	if !ok {
		return 0, fmt.Errorf("%s reported no %s", bench, unit)
	}
	return v, nil
}
