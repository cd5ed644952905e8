package initgc

import "runtime/debug"

// started is the collector's setting before initialisation turned it off.
var started = debug.SetGCPercent(-1)

// Resume turns the collector back on at the setting the program started
// with. Calling it again changes nothing.
func Resume() { debug.SetGCPercent(started) }
