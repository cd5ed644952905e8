// Command build-ray-image builds a Ray image without Docker (make
// worker-image, make ray-image) and prints its digest: the GPU worker
// image (-kind worker, extras from WORKER_IMAGE_EXTRAS) or the head/CPU
// image (-kind head, extras from RAY_IMAGE_EXTRAS). It runs as root
// (mmdebstrap's root mode) and keeps what it builds in its cache, so a
// second build of the same inputs takes seconds and gives the same
// digest.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"gridweave.dev/deploy/rayimage"
)

func main() {
	kind := flag.String("kind", "worker", "which image: worker (the GPU workers) or head (the head and CPU workers)")
	out := flag.String("out", "", "the image tarball to write (default bin/gridweave-<kind>-image.tar)")
	tag := flag.String("tag", "", "the image's tag (default "+rayimage.WorkerTag+" or "+rayimage.HeadTag+")")
	extras := flag.String("extras", "", "comma-separated extras the image adds (torch: PyPI's CUDA build; torch-cpu: Debian's CPU build); default $WORKER_IMAGE_EXTRAS for the worker, $RAY_IMAGE_EXTRAS for the head")
	cacheDir := flag.String("cache-dir", "", "where root filesystems and images are kept (default <user cache dir>/gridweave/rayimage)")
	quiet := flag.Bool("quiet", false, "do not show mmdebstrap's and pip's output")
	flag.Parse()
	if !flagGiven("extras") {
		*extras = os.Getenv("WORKER_IMAGE_EXTRAS")
		if *kind == string(rayimage.Head) {
			*extras = os.Getenv("RAY_IMAGE_EXTRAS")
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	o := rayimage.Options{Kind: rayimage.Kind(*kind), CacheDir: *cacheDir, Progress: os.Stderr, CABundle: caBundle()}
	if *quiet {
		o.Progress = io.Discard
	}
	for _, e := range strings.Split(*extras, ",") {
		if e = strings.TrimSpace(e); e != "" {
			o.Extras = append(o.Extras, e)
		}
	}
	if *out == "" {
		*out = "bin/gridweave-" + *kind + "-image.tar"
	}
	digest, err := rayimage.Build(ctx, o, *out, *tag)
	if err != nil {
		fmt.Fprintln(os.Stderr, "build-ray-image:", err)
		os.Exit(1)
	}
	info, err := os.Stat(*out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "build-ray-image:", err)
		os.Exit(1)
	}
	t := *tag
	if t == "" {
		t = o.Kind.Tag()
	}
	fmt.Printf("%s %s %s (%.0f MB)\n", t, digest, *out, float64(info.Size())/1e6)
}

// flagGiven says whether the command line set the flag.
func flagGiven(name string) bool {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// caBundle is the CA bundle pip on this machine trusts: $PIP_CERT, else
// $SSL_CERT_FILE, else Debian's.
func caBundle() string {
	for _, env := range []string{"PIP_CERT", "SSL_CERT_FILE"} {
		if f := os.Getenv(env); f != "" {
			return f
		}
	}
	return rayimage.DebianCACerts
}
