package gcpace

import (
	"os"
	"runtime/debug"

	"gridweave.dev/internal/gcpace/gcdefault"
)

// ShortCommand is the collector's percent while a short command runs: a
// heap may grow to nine times its live data before a collection.
const ShortCommand = 800

func init() {
	if _, set := os.LookupEnv("GOGC"); set {
		return // the user chose the pace
	}
	gcdefault.Record(debug.SetGCPercent(ShortCommand))
}

// Default sets the collector back to the pace the program started with
// (gcdefault.Default, for a program's main package).
func Default() { gcdefault.Default() }
