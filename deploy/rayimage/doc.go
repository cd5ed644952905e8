// Package rayimage builds the Ray images a Gridweave cluster runs, without
// Docker or a registry: the GPU worker image (gridweave-worker, the image
// RAY_IMAGE_WORKER names by default) and the head/CPU image (gridweave-ray).
//
// Both are one layer: a Debian bookworm root filesystem made by mmdebstrap
// (python3 with python on PATH, bash, wget and curl for KubeRay's probes, CA
// certificates) with Ray installed from PyPI by pip, pinned by Constraints,
// and the user ray (uid 1000, group users, home /home/ray) the image runs
// as. The worker image adds what the NVIDIA container runtime reads. Both
// give the head's dashboard modules 120 s to start, not Ray's 30: a head
// on a small machine busy starting pods otherwise exits once and restarts.
// Either image may take extras (Extras: Ray Train with PyPI's torch, or
// with Debian's CPU build of torch), each in a root filesystem of its own.
//
// Builds are reproducible and cached: the root filesystem is kept under
// the cache directory by a key of everything that goes into it (suite,
// packages, Ray's version, requirements and constraints, extras), every
// timestamp in the layer is the epoch, Python's bytecode is compiled in a
// fixed order with hash-based invalidation, and what differs between two
// runs of the same install (apt's caches and logs, ldconfig's cache,
// device nodes) is left out. The same inputs give the same digest. An
// image is cached by its root filesystem's key and the version of what
// the image puts around it (its configuration). Each use marks an entry
// used; a build removes the entries of other inputs unused for
// UnusedEntryAge, unless one is being built.
//
// The images are written as tarballs `ctr images import` and `docker load`
// read (Build copies one out of the cache; Cached names it in the cache);
// the server serves the worker's (WORKER_IMAGE_TAR) to the machines that
// join. The layer is compressed with zstd, which containerd 1.5 and later,
// CRI-O and Docker 23 and later read: a machine unpacks it several times
// faster than gzip's, and it is about a tenth smaller.
package rayimage
