// Package image builds the server's container image without Docker or a
// registry: one layer on an empty base with the static server binary, the
// CA certificates of Debian's ca-certificates package, an /etc/passwd
// naming a non-root user, and /data for the ledger; the config names the
// entrypoint, that user, the ports and OCI labels. Every timestamp is
// fixed, so the same inputs give the same digest. It uses
// go-containerregistry and writes a docker-loadable tarball or an OCI
// layout.
package image
