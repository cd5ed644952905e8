// Package gcdefault sets the garbage collector back to the pace a
// program started with, after package gcpace (imported by the program's
// main package only) set the short-command pace. A library that runs
// commands (the launcher's command line) calls Default when a command
// turns out to be long, and imports only this package, so embedding it
// never changes the embedding program's pace.
package gcdefault

import (
	"runtime/debug"
	"sync"
)

var (
	mu      sync.Mutex
	changed bool // gcpace set the short-command pace
	started int  // the percent the program started with
	done    bool
)

// Record notes that the collector's percent was changed from started
// (package gcpace calls it as it initialises).
func Record(startedWith int) {
	mu.Lock()
	defer mu.Unlock()
	changed, started = true, startedWith
}

// Default sets the collector back to the pace the program started with,
// if package gcpace changed it; once. Calling it again, from several
// goroutines, or in a program that never imported gcpace changes
// nothing.
func Default() {
	mu.Lock()
	defer mu.Unlock()
	if !changed || done {
		return
	}
	done = true
	debug.SetGCPercent(started)
}
