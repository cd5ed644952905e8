// Package testbinaries runs a module's tests from test binaries kept
// between runs. Link builds each package's test binary into a directory
// that outlives the run; the go command links one again only when what it
// is built from changed (it compares the binary's build ID with its
// inputs), so a warm run links only the binaries a change touched. Run
// starts one binary the way go test does (in its package's directory, the
// Go toolchain first on PATH) and reports it in go test's words (ok or
// FAIL, the package, the time), with the processor time of the binary and
// the processes it waited for. Every test runs each time, as with go test
// -count=1: what is kept is the link, never a result.
//
// Linking is most of a warm `go test -short ./...` here (about 90 of 140
// CPU-seconds), since most test binaries carry the Kubernetes client.
// cmd/run-tests is the command `make test-unit`, `make test-race` and
// make test's real-component tests run.
package testbinaries
