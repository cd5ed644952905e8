package gcpace

import (
	"os"
	"runtime/debug"
	"sync"
)

// ShortCommand is the collector's percent while a short command runs: a
// heap may grow to nine times its live data before a collection.
const ShortCommand = 800

// userSet reports whether the user chose the pace (GOGC); started is the
// percent the program started with.
var userSet, started = setForShortCommand()

func setForShortCommand() (bool, int) {
	if _, set := os.LookupEnv("GOGC"); set {
		return true, 0
	}
	return false, debug.SetGCPercent(ShortCommand)
}

var toDefault sync.Once

// Default sets the collector back to the pace the program started with,
// for a command whose input turned out to be large. Calling it again, or
// from several goroutines, changes nothing more; with GOGC set it does
// nothing at all.
func Default() {
	if userSet {
		return
	}
	toDefault.Do(func() { debug.SetGCPercent(started) })
}
