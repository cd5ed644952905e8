// Package raytest runs real Ray for tests: a Python virtual environment
// with Ray (and torch, for Ray Train) from PyPI, created on first use and
// cached outside the tree as internal/testcluster caches the control-plane
// binaries, and Ray heads and worker nodes started from it — on loopback or
// inside a test's network namespaces — and stopped with every process they
// started.
//
// Every Ray process runs with RAY_USAGE_STATS_ENABLED=0, so Ray reports
// nothing to an outside host, and binds to the address it is given.
//
// What is installed is pinned in requirements.txt (Ray, torch) and
// constraints.txt (everything they pull in) beside this file; changing
// either changes the cache key, so an old environment is never reused.
// `make ray-venv` builds the environment ahead of `go test`.
package raytest
