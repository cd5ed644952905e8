package rayimage

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// epoch is every timestamp in the layer.
var epoch = time.Unix(0, 0).UTC()

// normalizeFile writes the normalized copy of the tar at from to to.
func normalizeFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if err := normalize(in, out); err != nil {
		out.Close()
		return fmt.Errorf("rayimage: normalize %s: %w", from, err)
	}
	return out.Close()
}

// normalize copies a root filesystem's tar, in its order (mmdebstrap
// sorts it by name), leaving out what differs between two runs of the
// same install and what a container runtime provides, with every
// timestamp the epoch, numeric owners only and no extended headers beyond
// what long names need. Names lose their leading "./".
func normalize(r io.Reader, w io.Writer) error {
	tr, tw := tar.NewReader(r), tar.NewWriter(w)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(hdr.Name, "./")
		if name == "" || leftOut(name, hdr.Typeflag) {
			continue
		}
		clean := &tar.Header{
			Typeflag: hdr.Typeflag,
			Name:     name,
			Linkname: hdr.Linkname,
			Size:     hdr.Size,
			Mode:     hdr.Mode,
			Uid:      hdr.Uid,
			Gid:      hdr.Gid,
			ModTime:  epoch,
			Devmajor: hdr.Devmajor,
			Devminor: hdr.Devminor,
		}
		if hdr.Typeflag == tar.TypeLink {
			clean.Linkname = strings.TrimPrefix(hdr.Linkname, "./")
		}
		if err := tw.WriteHeader(clean); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if hdr.Typeflag == tar.TypeReg {
			if _, err := io.Copy(tw, tr); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	return tw.Close()
}

// leftOut says whether an entry stays out of the layer: device nodes (the
// runtime mounts /dev), apt's package lists and caches, logs, ldconfig's
// auxiliary cache, dpkg's and debconf's backups, the build machine's
// resolv.conf and hostname: each differs between two runs of the same
// install or between machines, none is needed to run. Directories stay.
func leftOut(name string, typ byte) bool {
	if typ == tar.TypeChar || typ == tar.TypeBlock || typ == tar.TypeFifo {
		return true
	}
	if typ == tar.TypeDir {
		return false
	}
	for _, prefix := range []string{"dev/", "var/lib/apt/lists/", "var/cache/apt/", "var/log/", "var/cache/debconf/", "run/"} {
		if strings.HasPrefix(name, prefix) {
			return !strings.HasPrefix(name, "var/cache/debconf/") || strings.HasSuffix(name, "-old")
		}
	}
	// The build machine's resolver and name, which mmdebstrap copies in
	// for apt and pip: a container runtime provides both.
	switch name {
	case "etc/resolv.conf", "etc/hostname", "var/cache/ldconfig/aux-cache":
		return true
	}
	return strings.HasPrefix(name, "var/lib/dpkg/") && strings.HasSuffix(name, "-old")
}
