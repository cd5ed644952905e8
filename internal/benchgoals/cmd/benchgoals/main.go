// Command benchgoals runs the benchmarks that carry the project's goals
// and prints one table: figure, goal, met or not (make bench; with
// -short, the quick subset: make bench-short).
//
//	go run ./internal/benchgoals/cmd/benchgoals [-short] [-only REGEXP]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"regexp"

	"gridweave.dev/internal/benchgoals"
)

func main() {
	short := flag.Bool("short", false, "only the quick subset")
	only := flag.String("only", "", "only the goals whose name matches this regular expression")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	dir, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var match *regexp.Regexp
	if *only != "" {
		if match, err = regexp.Compile(*only); err != nil {
			fmt.Fprintln(os.Stderr, "-only:", err)
			os.Exit(2)
		}
	}
	var goals []benchgoals.Goal
	for _, g := range benchgoals.Goals() {
		if (*short && !g.Short) || (match != nil && !match.MatchString(g.Name)) {
			continue
		}
		goals = append(goals, g)
	}
	r := &benchgoals.Runner{Dir: dir, Log: os.Stderr}
	outcomes := r.RunAll(ctx, goals)
	benchgoals.Table(os.Stdout, outcomes)
	for _, o := range outcomes {
		if o.Err != nil {
			fmt.Fprintf(os.Stderr, "%s (%s): %v\n", o.Goal.Name, o.Took.Round(1e9), o.Err)
		}
	}
}
