package launchcli

import (
	"io"
	"sync/atomic"

	"github.com/spf13/cobra"

	"gridweave.dev/internal/gcpace/gcdefault"
)

// The offline commands are short: gcpace (imported by the launcher's
// main) lets the launcher start and run them without a collection. Lint of large input goes back to the
// default pace once it has read largeInput bytes, where a heap of nine
// times the live data would cost more memory than the collections save.
const largeInput = 1 << 20

// shortCommands are the launcher's top-level commands that run at the
// short-command pace. The others (run, cluster, status, logs, job, dev,
// doctor) wait on a cluster for minutes or follow logs without end, and
// run at the default pace.
var shortCommands = map[string]bool{"check": true, "render": true, "lint": true, "chart": true, "help": true, "completion": true}

// defaultPace is gcdefault.Default (tests count its calls): the pace
// the program started with, when its main package imported gcpace.
var defaultPace = gcdefault.Default

// paceFor sets the collector's pace for the command args name under root.
func paceFor(root *cobra.Command, args []string) {
	c, _, err := root.Find(args)
	if err != nil || c == root {
		return // usage, or an unknown command: cobra says so and ends
	}
	for c.Parent() != root {
		c = c.Parent()
	}
	if !shortCommands[c.Name()] {
		defaultPace()
	}
}

// inputBytes counts what lint reads, over every file and stdin, and calls
// large (nil: defaultPace) on each read past largeInput.
type inputBytes struct {
	n     atomic.Int64
	large func()
}

// counting returns r, counted.
func (c *inputBytes) counting(r io.Reader) io.Reader { return countedReader{r: r, total: c} }

type countedReader struct {
	r     io.Reader
	total *inputBytes
}

func (c countedReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if c.total.n.Add(int64(n)) > largeInput {
		if c.total.large != nil {
			c.total.large()
		} else {
			defaultPace()
		}
	}
	return n, err
}
