// Package gcpace paces the garbage collector for a short-lived command:
// imported by a program's main package (and only there: importing it is
// what sets the pace), it sets the collector's percent to ShortCommand
// while the packages initialise, and gcdefault.Default sets it back to
// the pace the program started with when the command turns out to be a
// long one; a library calls that, never importing this package. A GOGC
// the user set is left alone.
//
// A command that links Kubernetes' API machinery, CEL and KubeRay
// initialises several hundred packages before main runs; they allocate a
// few megabytes that stay live (API schemes, type registries), so at the
// default pace (GOGC=100, a first goal of 4 MB) the collector runs twice
// before the command has read its input, over data that lives until
// exit. At ShortCommand the first goal is 32 MB: `launcher lint` of one
// RayCluster, `launcher check` and `launcher --help` run no collection at
// all, about 5 ms sooner, and their peak resident set is a megabyte
// smaller (the collector's own work touches pages); lint of the users'
// corpus (manifest/validation/testdata/users, 165 objects whose CEL rules
// are compiled as they are met) collects once, not twice: 97 -> 88 ms and
// 88 -> 80 MB peak, medians of 40 runs side by side with a percent of 400.
// A command with large input (lint of a 10 MB file) would keep up to nine
// times its live data at that pace, and so would one that runs for
// minutes: they call Default once they know, and run as they did.
//
// Go initialises packages in the order of their import paths, each once
// the packages it imports are done. This one imports only os,
// runtime/debug and gcdefault (sync, runtime/debug), so it waits for
// those, behind every ready package whose
// path sorts before "os": in the launcher it is the 169th of 379, after
// 1 MB of the 4.7 MB initialisation allocates, well before the first
// collection (at 4 MB) and before client-go's and controller-runtime's
// schemes, which allocate most of the rest (GODEBUG=inittrace=1).
// rayctl/launch/launchcli's TestShortCommandsRunWithoutACollection fails if a
// collection comes first.
package gcpace
