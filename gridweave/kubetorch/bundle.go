package kubetorch

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// Formats of an upload.
const (
	FormatTarGz = "tar.gz"
	FormatZip   = "zip"
)

// Limits bound what a bundle may expand to.
type Limits struct {
	// MaxUpload is the largest upload, compressed (default 256 MiB).
	MaxUpload int64
	// MaxExpanded is the largest total of the files (default 512 MiB).
	MaxExpanded int64
	// MaxEntries is the most entries (default 10,000).
	MaxEntries int
	// MaxRatio is the largest expanded/compressed ratio, checked once
	// more than RatioGrace bytes have been expanded (default 100, 1 MiB).
	MaxRatio   int64
	RatioGrace int64
}

func (l Limits) withDefaults() Limits {
	if l.MaxUpload <= 0 {
		l.MaxUpload = 256 << 20
	}
	if l.MaxExpanded <= 0 {
		l.MaxExpanded = 512 << 20
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = 10000
	}
	if l.MaxRatio <= 0 {
		l.MaxRatio = 100
	}
	if l.RatioGrace <= 0 {
		l.RatioGrace = 1 << 20
	}
	return l
}

// EntryError is an entry of the archive that is refused, or a limit it
// passes; Entry names it ("" for the archive as a whole).
type EntryError struct {
	Entry   string
	Problem string
}

func (e *EntryError) Error() string {
	if e.Entry == "" {
		return "bundle: " + e.Problem
	}
	return fmt.Sprintf("bundle entry %q: %s", e.Entry, e.Problem)
}

// ErrTooLarge is wrapped when the upload is larger than MaxUpload.
var ErrTooLarge = errors.New("bundle: the upload is larger than allowed")

// Root is the top-level directory of the zip Ray gets.
const Root = "bundle"

// Bundle is a stored bundle.
type Bundle struct {
	ID    string // hex SHA-256 of the uploaded bytes
	Size  int64  // of the upload
	Files int    // regular files in it
	Path  string // the zip for Ray
}

// Store keeps bundles in a directory.
type Store struct {
	Dir    string
	Limits Limits
}

// Put reads an upload of format (FormatTarGz or FormatZip), checks it and
// stores it. The same bytes twice are the same bundle, stored once.
func (s *Store) Put(r io.Reader, format string) (Bundle, error) {
	lim := s.Limits.withDefaults()
	if format != FormatTarGz && format != FormatZip {
		return Bundle{}, fmt.Errorf("bundle: unknown format %q (tar.gz or zip)", format)
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return Bundle{}, err
	}
	// The upload goes to a file (a zip needs random access), hashed on
	// the way, bounded by MaxUpload.
	up, err := os.CreateTemp(s.Dir, ".upload-*")
	if err != nil {
		return Bundle{}, err
	}
	defer os.Remove(up.Name())
	defer up.Close()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(up, h), io.LimitReader(r, lim.MaxUpload+1))
	if err != nil {
		return Bundle{}, fmt.Errorf("bundle: read the upload: %w", err)
	}
	if n > lim.MaxUpload {
		return Bundle{}, fmt.Errorf("%w (%d bytes)", ErrTooLarge, lim.MaxUpload)
	}
	if n == 0 {
		return Bundle{}, &EntryError{Problem: "the upload is empty"}
	}
	id := hex.EncodeToString(h.Sum(nil))
	final := filepath.Join(s.Dir, id+".zip")
	if fi, err := os.Stat(final); err == nil {
		files, _ := countFiles(final)
		return Bundle{ID: id, Size: n, Files: files, Path: final}, nil
	} else if fi != nil {
		return Bundle{}, err
	}
	out, err := os.CreateTemp(s.Dir, ".bundle-*.zip")
	if err != nil {
		return Bundle{}, err
	}
	defer os.Remove(out.Name())
	zw := zip.NewWriter(out)
	files, err := convert(up, n, format, lim, zw)
	if err == nil && files == 0 {
		err = &EntryError{Problem: "the bundle holds no files"}
	}
	if err == nil {
		err = zw.Close()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Bundle{}, err
	}
	if err := os.Rename(out.Name(), final); err != nil {
		return Bundle{}, err
	}
	return Bundle{ID: id, Size: n, Files: files, Path: final}, nil
}

// Open returns the stored zip of bundle id (hex SHA-256), or an error.
func (s *Store) Open(id string) (*os.File, error) {
	if len(id) != 64 || strings.Trim(id, "0123456789abcdef") != "" {
		return nil, os.ErrNotExist
	}
	return os.Open(filepath.Join(s.Dir, id+".zip"))
}

// entryName checks and cleans an archive entry's name: relative, inside
// the root, no parent steps, no NUL, not empty.
func entryName(name string) (string, error) {
	raw := name
	if strings.ContainsRune(name, 0) || strings.Contains(name, "\\") {
		return "", &EntryError{Entry: raw, Problem: "a name with a NUL or a backslash"}
	}
	if path.IsAbs(name) || (len(name) >= 2 && name[1] == ':') {
		return "", &EntryError{Entry: raw, Problem: "an absolute path: every entry must be relative to the bundle's root"}
	}
	for _, part := range strings.Split(name, "/") {
		if part == ".." {
			return "", &EntryError{Entry: raw, Problem: "escapes the bundle's root (..)"}
		}
	}
	clean := path.Clean(strings.TrimPrefix(name, "./"))
	if clean == "." || clean == "" {
		return "", nil // the root itself
	}
	return clean, nil
}

// counter enforces the limits while entries are expanded.
type counter struct {
	lim        Limits
	compressed func() int64 // bytes of the upload consumed so far
	expanded   int64
	entries    int
	seen       map[string]bool
	current    string
	// links are the links accepted so far: nothing may be written under
	// one, and no link may point through one, since on disk the path then
	// continues wherever the link points, which no lexical check sees.
	links map[string]bool
}

func (c *counter) entry(name string) error {
	c.entries++
	if c.entries > c.lim.MaxEntries {
		return &EntryError{Entry: name, Problem: fmt.Sprintf("more than %d entries", c.lim.MaxEntries)}
	}
	if c.seen[name] {
		return &EntryError{Entry: name, Problem: "a duplicate path"}
	}
	for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
		if c.links[dir] {
			return &EntryError{Entry: name, Problem: fmt.Sprintf("an entry under the link %q", dir)}
		}
	}
	c.seen[name] = true
	c.current = name
	return nil
}

// Write counts expanded bytes and checks the total and the ratio.
func (c *counter) Write(p []byte) (int, error) {
	c.expanded += int64(len(p))
	if c.expanded > c.lim.MaxExpanded {
		return 0, &EntryError{Entry: c.current, Problem: fmt.Sprintf("the bundle expands to more than %d bytes", c.lim.MaxExpanded)}
	}
	if c.expanded > c.lim.RatioGrace {
		if comp := max(c.compressed(), 1); c.expanded/comp > c.lim.MaxRatio {
			return 0, &EntryError{Entry: c.current, Problem: fmt.Sprintf("expands more than %d:1 (a decompression bomb?)", c.lim.MaxRatio)}
		}
	}
	return len(p), nil
}

var epoch = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)

// convert checks every entry of the upload and writes its files into zw
// under Root; it returns the number of files.
func convert(up *os.File, size int64, format string, lim Limits, zw *zip.Writer) (int, error) {
	if _, err := up.Seek(0, io.SeekStart); err != nil {
		return 0, err
	}
	cr := &countingReader{r: up}
	c := &counter{lim: lim, seen: map[string]bool{}, compressed: func() int64 { return cr.n }}
	files := 0
	add := func(name string, mode os.FileMode, body io.Reader) error {
		clean, err := entryName(name)
		if err != nil || clean == "" {
			return err
		}
		if err := c.entry(clean); err != nil {
			return err
		}
		if mode.IsDir() {
			_, err := zw.CreateHeader(&zip.FileHeader{Name: Root + "/" + clean + "/", Modified: epoch})
			return err
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: Root + "/" + clean, Method: zip.Deflate, Modified: epoch, ExternalAttrs: uint32(mode.Perm()|0o600) << 16})
		if err != nil {
			return err
		}
		files++
		_, err = io.Copy(io.MultiWriter(w, c), entryReader{r: body, entry: clean})
		return err
	}
	switch format {
	case FormatTarGz:
		gz, err := gzip.NewReader(cr)
		if err != nil {
			return 0, &EntryError{Problem: "not a gzip stream: " + err.Error()}
		}
		tr := tar.NewReader(gz)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				return files, nil
			}
			if err != nil {
				return 0, &EntryError{Problem: "not a tar archive: " + err.Error()}
			}
			switch h.Typeflag {
			//lint:ignore SA1019 archives written by old tools still carry TypeRegA
			case tar.TypeReg, tar.TypeRegA:
				err = add(h.Name, os.FileMode(h.Mode)&os.ModePerm, tr)
			case tar.TypeDir:
				err = add(h.Name, os.ModeDir, nil)
			case tar.TypeSymlink, tar.TypeLink:
				err = link(h.Name, h.Linkname, h.Typeflag == tar.TypeLink, c, zw)
			case tar.TypeXGlobalHeader, tar.TypeXHeader:
				continue
			default:
				err = &EntryError{Entry: h.Name, Problem: "a device, FIFO or other special file"}
			}
			if err != nil {
				return 0, err
			}
		}
	default:
		zr, err := zip.NewReader(up, size)
		if err != nil {
			return 0, &EntryError{Problem: "not a zip archive: " + err.Error()}
		}
		if len(zr.File) > lim.MaxEntries {
			return 0, &EntryError{Problem: fmt.Sprintf("more than %d entries", lim.MaxEntries)}
		}
		// A zip's compressed sizes are known: the ratio is of the whole.
		cr.n = size
		for _, f := range zr.File {
			mode := f.Mode()
			switch {
			case mode&os.ModeSymlink != 0:
				rc, err := f.Open()
				if err != nil {
					return 0, &EntryError{Entry: f.Name, Problem: err.Error()}
				}
				target, err := io.ReadAll(io.LimitReader(rc, 4096))
				rc.Close()
				if err != nil {
					return 0, &EntryError{Entry: f.Name, Problem: err.Error()}
				}
				if err := link(f.Name, string(target), false, c, zw); err != nil {
					return 0, err
				}
			case mode.IsDir() || strings.HasSuffix(f.Name, "/"):
				if err := add(f.Name, os.ModeDir, nil); err != nil {
					return 0, err
				}
			case mode.IsRegular():
				rc, err := f.Open()
				if err != nil {
					return 0, &EntryError{Entry: f.Name, Problem: err.Error()}
				}
				err = add(f.Name, mode.Perm(), rc)
				rc.Close()
				if err != nil {
					return 0, err
				}
			default:
				return 0, &EntryError{Entry: f.Name, Problem: "a device, FIFO or other special file"}
			}
		}
		return files, nil
	}
}

// link accepts a link whose target stays inside the root, and stores it
// as a symlink entry (WritePackage turns it into a copy of its target for
// Ray, whose unzip does not make links); a link pointing out is refused.
func link(name, target string, hard bool, c *counter, zw *zip.Writer) error {
	clean, err := entryName(name)
	if err != nil {
		return err
	}
	if clean == "" {
		return &EntryError{Entry: name, Problem: "a link as the root"}
	}
	if path.IsAbs(target) {
		return &EntryError{Entry: name, Problem: fmt.Sprintf("a link to %q, outside the bundle", target)}
	}
	from := path.Dir(clean)
	if hard {
		from = "." // hard link names are relative to the root
	}
	resolved, problem := c.follow(from, target)
	if problem != "" {
		return &EntryError{Entry: name, Problem: fmt.Sprintf("a link to %q, %s", target, problem)}
	}
	for seen := range c.seen {
		if strings.HasPrefix(seen, clean+"/") {
			return &EntryError{Entry: name, Problem: fmt.Sprintf("a link where the bundle has entries (%q)", seen)}
		}
	}
	if err := c.entry(clean); err != nil {
		return err
	}
	if c.links == nil {
		c.links = map[string]bool{}
	}
	c.links[clean] = true
	rel := target
	if hard {
		// A hard link becomes a symlink relative to the link's directory.
		up := strings.Repeat("../", strings.Count(clean, "/"))
		rel = up + resolved
	}
	h := &zip.FileHeader{Name: Root + "/" + clean, Modified: epoch}
	h.SetMode(os.ModeSymlink | 0o777)
	w, err := zw.CreateHeader(h)
	if err != nil {
		return err
	}
	_, err = io.Copy(w, bytes.NewReader([]byte(rel)))
	return err
}

// follow walks target from the directory from, one step at a time as the
// file system would: it refuses a step above the root and a step through
// a link accepted before (whose own target the walk would have to
// follow). It returns the path inside the root.
func (c *counter) follow(from, target string) (resolved, problem string) {
	var at []string
	if from != "." {
		at = strings.Split(from, "/")
	}
	for _, step := range strings.Split(target, "/") {
		switch step {
		case "", ".":
			continue
		case "..":
			if len(at) == 0 {
				return "", "outside the bundle"
			}
			at = at[:len(at)-1]
		default:
			at = append(at, step)
			if c.links[strings.Join(at, "/")] {
				return "", fmt.Sprintf("through the link %q", strings.Join(at, "/"))
			}
		}
	}
	if len(at) == 0 {
		return "", "the bundle's root"
	}
	return strings.Join(at, "/"), ""
}

// entryReader reads an entry's data. A read that fails in the archive (a
// stream cut short, a corrupt deflate block, a checksum that does not
// match) is the upload's fault, an *EntryError; one of the file the
// upload was kept in (*fs.PathError) is the server's.
type entryReader struct {
	r     io.Reader
	entry string
}

func (e entryReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	var onDisk *fs.PathError
	if err != nil && err != io.EOF && !errors.As(err, &onDisk) {
		err = &EntryError{Entry: e.entry, Problem: "its data cannot be read: " + err.Error()}
	}
	return n, err
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// countFiles counts the regular files of a stored zip.
func countFiles(path string) (int, error) {
	zr, err := zip.OpenReader(path)
	if err != nil {
		return 0, err
	}
	defer zr.Close()
	n := 0
	for _, f := range zr.File {
		if f.Mode().IsRegular() {
			n++
		}
	}
	return n, nil
}

// PackageURI is the bundle's name as a package of the Ray cluster
// (gcs://, the scheme runtime_env.working_dir takes for a package held by
// the cluster itself): content-addressed like the bundle.
func PackageURI(id string) string {
	return "gcs://_ray_pkg_" + id[:min(len(id), 32)] + ".zip"
}

// WritePackage writes the bundle as the package Ray's job API takes
// (PUT /api/packages/gcs/...): the same files at the top level, since Ray
// unpacks a cluster-held package as it is (it strips the top-level
// directory only from packages it downloads). Ray's unzip writes a link
// entry as a plain file holding the target's path, so each link becomes
// a copy of what it points to (a file, or a directory's files); a link
// to nothing is left out. Entries are copied without recompression.
func (s *Store) WritePackage(id string, w io.Writer) error {
	f, err := s.Open(id)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	zr, err := zip.NewReader(f, fi.Size())
	if err != nil {
		return fmt.Errorf("kubetorch: bundle %s: %w", id, err)
	}
	entries := map[string]*zip.File{} // name inside the root, without a trailing slash
	var names []string
	for _, e := range zr.File {
		name, ok := strings.CutPrefix(e.Name, Root+"/")
		if !ok || strings.TrimSuffix(name, "/") == "" {
			continue // the top-level directory itself
		}
		entries[strings.TrimSuffix(name, "/")] = e
		names = append(names, name)
	}
	zw := zip.NewWriter(w)
	for _, name := range names {
		e := entries[strings.TrimSuffix(name, "/")]
		if e.Mode()&os.ModeSymlink == 0 {
			if err := copyRaw(zw, e, name); err != nil {
				return err
			}
			continue
		}
		target, ok := resolveLink(entries, name)
		if !ok {
			continue
		}
		t := entries[target]
		if !t.Mode().IsDir() {
			if err := copyRaw(zw, t, name); err != nil {
				return err
			}
			continue
		}
		for _, under := range names { // a link to a directory: what it holds
			inside, ok := strings.CutPrefix(under, target+"/")
			if !ok || inside == "" {
				continue
			}
			held := strings.TrimSuffix(under, "/")
			if entries[held].Mode()&os.ModeSymlink != 0 {
				// A link inside: a copy of its file (a link from there to
				// a directory is left out rather than walked again).
				if held, ok = resolveLink(entries, held); !ok || entries[held].Mode().IsDir() {
					continue
				}
			}
			if err := copyRaw(zw, entries[held], name+"/"+inside); err != nil {
				return err
			}
		}
	}
	return zw.Close()
}

// resolveLink follows a link entry (and links it lands on, a few hops at
// most) to the entry it names.
func resolveLink(entries map[string]*zip.File, name string) (string, bool) {
	at := name
	for range 8 {
		e, ok := entries[at]
		if !ok {
			return "", false
		}
		if e.Mode()&os.ModeSymlink == 0 {
			return at, true
		}
		r, err := e.Open()
		if err != nil {
			return "", false
		}
		target, err := io.ReadAll(io.LimitReader(r, 4096))
		r.Close()
		if err != nil {
			return "", false
		}
		at = path.Clean(path.Join(path.Dir(at), string(target)))
	}
	return "", false
}

// copyRaw writes entry e under name, its compressed bytes as they are.
func copyRaw(zw *zip.Writer, e *zip.File, name string) error {
	header := e.FileHeader
	header.Name = name
	raw, err := e.OpenRaw()
	if err != nil {
		return err
	}
	out, err := zw.CreateRaw(&header)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, raw)
	return err
}
