// Package raytest runs real Ray for tests: a Python virtual environment
// with Ray (and torch, for Ray Train) from PyPI, created on first use and
// cached outside the tree as internal/testcluster caches the control-plane
// binaries, and Ray heads and worker nodes started from it, each inside a
// network namespace (one of this package's, linked to the host on
// 198.18.0.0/15, or a test's machine namespace) and stopped with every
// process it started, also when the test process dies.
//
// Ray's GCS and raylet listen on every address of their namespace and run
// what they are sent, so no node runs in the host's. Every Ray process runs
// with RAY_USAGE_STATS_ENABLED=0, so Ray reports nothing to an outside host.
//
// What is installed is pinned in requirements.txt (Ray, torch) and
// constraints.txt (everything they pull in) beside this file; changing
// either changes the cache key, so an old environment is never reused.
// `make ray-venv` builds the environment ahead of `go test`.
package raytest
