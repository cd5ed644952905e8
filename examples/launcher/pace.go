package main

import (
	"io"
	"sync/atomic"

	"gridweave.dev/internal/gcpace"
)

// The offline commands are short: gcpace lets the launcher start and run
// them without a collection. Lint of large input goes back to the
// default pace once it has read largeInput bytes, where a heap of five
// times the live data would cost more memory than the collections save.
const largeInput = 1 << 20

// inputBytes counts what lint reads, over every file and stdin, and calls
// large (nil: gcpace.Default) on each read past largeInput.
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
			gcpace.Default()
		}
	}
	return n, err
}
