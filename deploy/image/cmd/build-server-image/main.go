// Command build-server-image builds the server's container image (make
// image): the server built as one static binary, on an empty base, written
// as a tarball and an OCI layout; it prints the digest. Run it from the
// module's root.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"gridweave.dev/deploy/image"
)

func main() {
	binary := flag.String("binary", "bin/gridweave-server", "where the static server binary is built")
	binaryOnly := flag.Bool("binary-only", false, "build the static binary only")
	version := flag.String("version", "0.1.0", "the server's version (built in, image label and tag)")
	revision := flag.String("revision", "", "the source's commit (label)")
	tarballPath := flag.String("tarball", "bin/gridweave-server-image.tar", "the image as a loadable tarball")
	layoutDir := flag.String("oci-layout", "", "also write an OCI image layout into this directory")
	flag.Parse()
	if err := build(*binary, *binaryOnly, *version, *revision, *tarballPath, *layoutDir); err != nil {
		fmt.Fprintln(os.Stderr, "build-server-image:", err)
		os.Exit(1)
	}
}

func build(binary string, binaryOnly bool, version, revision, tarballPath, layoutDir string) error {
	if err := image.BuildStatic(context.Background(), ".", binary, version); err != nil {
		return err
	}
	if binaryOnly {
		fmt.Println(binary)
		return nil
	}
	img, err := image.Build(image.Options{Binary: binary, Version: version, Revision: revision})
	if err != nil {
		return err
	}
	if err := image.WriteTarball(img, "gridweave/server:"+version, tarballPath); err != nil {
		return err
	}
	if layoutDir != "" {
		if err := image.WriteLayout(img, layoutDir); err != nil {
			return err
		}
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("gridweave/server:%s %s -> %s\n", version, digest, tarballPath)
	return nil
}
