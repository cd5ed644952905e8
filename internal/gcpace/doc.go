// Package gcpace paces the garbage collector for a short-lived command:
// imported by a program's main package, it sets the collector's percent
// to ShortCommand while the packages initialise, and Default sets it back
// to the pace the program started with when the command turns out to be
// a long one. A GOGC the user set is left alone.
//
// A command that links Kubernetes' API machinery, CEL and KubeRay
// initialises several hundred packages before main runs; they allocate a
// few megabytes that stay live (API schemes, type registries), so at the
// default pace (GOGC=100, a first goal of 4 MB) the collector runs twice
// before the command has read its input, over data that lives until
// exit. At ShortCommand the first goal is 16 MB: `launcher lint` of one
// RayCluster and `launcher --help` run no collection at all, about 5 ms
// sooner, and their peak resident set is a megabyte smaller (the
// collector's own work touches pages). A command with large input (lint of
// a 10 MB file) would keep up to five times its live data at that pace;
// it calls Default once it knows, and runs as it did.
//
// Go initialises packages in the order of their import paths, each once
// the packages it imports are done, so this one (importing only os and
// runtime/debug) runs before the k8s.io and sigs.k8s.io packages, whose
// schemes make most of the allocation, and before the first collection.
package gcpace
