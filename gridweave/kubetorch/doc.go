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
package kubetorch
