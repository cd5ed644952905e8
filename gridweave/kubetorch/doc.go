// Package kubetorch keeps the code bundles KubeTorch trains from: an
// upload (tar.gz or zip) is checked entry by entry — nothing that escapes
// its root (.., absolute paths, links pointing out, device files),
// no duplicate paths, no decompression bomb (limits on the total expanded
// size, the number of entries and the compression ratio) — then stored,
// content-addressed by the SHA-256 of the uploaded bytes (the same bytes
// are one bundle, stored once), as a zip with every file under one
// top-level directory (what a working_dir Ray downloads must be);
// WritePackage gives it the form of a package the Ray cluster holds
// (PackageURI, gcs://), files at the top and links made copies, which is
// how training sends it.
//
// A Trainer trains from them on a RayCluster's GPU workers: Train checks
// the request, counts the cluster's ready GPU workers, sends the bundle
// to the cluster once, submits a Ray job through the dashboard that runs
// the user's command on every GPU under Ray Train's torch backend, and
// records it as a GridweaveJob (Jobs, a typed client of the CRD); Job and
// FollowJobs bring a GridweaveJob's status in step with its Ray job;
// Health says whether a cluster can train. Errors are typed (FieldError,
// DashboardError, ErrNoGPUWorkers, ErrNoDashboard, ErrJobNotFound), so a
// server maps them to its answers in one place.
package kubetorch
