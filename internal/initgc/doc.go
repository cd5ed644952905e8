// Package initgc turns the garbage collector off while a program's packages
// initialise, and main turns it back on with Resume, at the setting the
// program started with (GOGC included).
//
// A command that links Kubernetes' API machinery initialises several
// hundred packages before main runs; they allocate a few megabytes that
// stay live (API schemes, type registries), and the collector's cycles
// over them are wasted work and touch pages the process would not
// otherwise map. For a short-lived command such as `launcher lint`, that
// is about 6 ms and 6 MB of its peak resident set (BenchmarkProcess in
// examples/launcher).
//
// Go initialises packages in the order of their import paths, each once
// the packages it imports are done, so this one runs early: in the
// launcher, after 168 of its 379 packages (the standard library and the
// first github.com ones), before the API schemes of k8s.io and
// sigs.k8s.io, which take two thirds of the initialisation time
// (GODEBUG=inittrace=1). Import it from package main only, and call Resume
// first thing in main.
package initgc
