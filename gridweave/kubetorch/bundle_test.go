package kubetorch_test

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gridweave.dev/gridweave/kubetorch"
)

// entry is one member of a test archive.
type entry struct {
	name, body, link string
	kind             byte // tar type flag; 0 a regular file
}

func tarGz(t testing.TB, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.body)), Typeflag: tar.TypeReg, Linkname: e.link}
		if e.kind != 0 {
			h.Typeflag, h.Size = e.kind, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			_, _ = tw.Write([]byte(e.body))
		}
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

func zipOf(t testing.TB, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate}
		body := e.body
		if e.kind == tar.TypeSymlink {
			h.SetMode(os.ModeSymlink | 0o777)
			body = e.link
		} else {
			h.SetMode(0o644)
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = w.Write([]byte(body))
	}
	zw.Close()
	return buf.Bytes()
}

func names(t *testing.T, path string) []string {
	t.Helper()
	zr, err := zip.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	var out []string
	for _, f := range zr.File {
		out = append(out, f.Name)
	}
	return out
}

func TestBundlesAreStoredOnceUnderOneRoot(t *testing.T) {
	s := &kubetorch.Store{Dir: t.TempDir()}
	upload := tarGz(t, entry{name: "train.py", body: "print(1)\n"}, entry{name: "pkg/", kind: tar.TypeDir}, entry{name: "pkg/model.py", body: "x = 1\n"},
		entry{name: "pkg/latest.py", kind: tar.TypeSymlink, link: "model.py"})
	b, err := s.Put(bytes.NewReader(upload), kubetorch.FormatTarGz)
	if err != nil {
		t.Fatal(err)
	}
	if b.Files != 2 || b.Size != int64(len(upload)) || len(b.ID) != 64 {
		t.Errorf("bundle %+v", b)
	}
	if got := names(t, b.Path); !slices.Equal(got, []string{"bundle/train.py", "bundle/pkg/", "bundle/pkg/model.py", "bundle/pkg/latest.py"}) {
		t.Errorf("the zip holds %v", got)
	}
	again, err := s.Put(bytes.NewReader(upload), kubetorch.FormatTarGz)
	if err != nil || again.ID != b.ID || again.Files != 2 {
		t.Errorf("the same upload again: %+v, %v", again, err)
	}
	entries, _ := os.ReadDir(s.Dir)
	if len(entries) != 1 {
		t.Errorf("the store holds %d files, want the one bundle", len(entries))
	}
	z, err := s.Put(bytes.NewReader(zipOf(t, entry{name: "main.py", body: "print(2)\n"})), kubetorch.FormatZip)
	if err != nil || z.Files != 1 || z.ID == b.ID {
		t.Errorf("a zip upload: %+v, %v", z, err)
	}
	if _, err := s.Open("../" + b.ID); err == nil {
		t.Error("Open accepted a path, not an id")
	}
}

func TestBundlesRefuseWhatEscapesOrExplodes(t *testing.T) {
	zeros := strings.Repeat("\x00", 4<<20) // compresses far beyond 100:1
	// Data that does not compress, cut off half-way through; and a zip
	// entry whose compressed data has a byte changed.
	noise := make([]byte, 64<<10)
	_, _ = rand.Read(noise)
	whole := tarGz(t, entry{name: "big.py", body: string(noise)})
	cut := whole[:len(whole)/2]
	corrupt := zipOf(t, entry{name: "a.py", body: strings.Repeat("print('hello')\n", 200)})
	corrupt[30+len("a.py")+8] ^= 0xff // in the deflate stream, after the local header
	many := make([]entry, 0, 12)
	for i := range 12 {
		many = append(many, entry{name: "f" + string(rune('a'+i)), body: "x"})
	}
	cases := []struct {
		what, format, entry string
		upload              []byte
		limits              kubetorch.Limits
	}{
		{"a parent step", kubetorch.FormatTarGz, "../evil.py", tarGz(t, entry{name: "../evil.py", body: "x"}), kubetorch.Limits{}},
		{"a parent step inside", kubetorch.FormatTarGz, "a/../../evil", tarGz(t, entry{name: "a/../../evil", body: "x"}), kubetorch.Limits{}},
		{"an absolute path", kubetorch.FormatTarGz, "/etc/cron.d/x", tarGz(t, entry{name: "/etc/cron.d/x", body: "x"}), kubetorch.Limits{}},
		{"a symlink out", kubetorch.FormatTarGz, "ssh", tarGz(t, entry{name: "ssh", kind: tar.TypeSymlink, link: "/root/.ssh"}), kubetorch.Limits{}},
		{"a relative symlink out", kubetorch.FormatTarGz, "a/up", tarGz(t, entry{name: "a/up", kind: tar.TypeSymlink, link: "../../etc"}), kubetorch.Limits{}},
		{"a hard link out", kubetorch.FormatTarGz, "h", tarGz(t, entry{name: "h", kind: tar.TypeLink, link: "../etc/passwd"}), kubetorch.Limits{}},
		{"a device file", kubetorch.FormatTarGz, "dev", tarGz(t, entry{name: "dev", kind: tar.TypeChar}), kubetorch.Limits{}},
		{"a FIFO", kubetorch.FormatTarGz, "fifo", tarGz(t, entry{name: "fifo", kind: tar.TypeFifo}), kubetorch.Limits{}},
		{"a duplicate path", kubetorch.FormatTarGz, "a.py", tarGz(t, entry{name: "a.py", body: "1"}, entry{name: "./a.py", body: "2"}), kubetorch.Limits{}},
		{"too many entries", kubetorch.FormatTarGz, "fk", tarGz(t, many...), kubetorch.Limits{MaxEntries: 10}},
		{"a bomb", kubetorch.FormatTarGz, "zeros", tarGz(t, entry{name: "zeros", body: zeros}), kubetorch.Limits{}},
		{"too much expanded", kubetorch.FormatTarGz, "zeros", tarGz(t, entry{name: "zeros", body: zeros}), kubetorch.Limits{MaxExpanded: 1 << 20, MaxRatio: 1 << 30}},
		{"a zip with a parent step", kubetorch.FormatZip, "../x", zipOf(t, entry{name: "../x", body: "x"}), kubetorch.Limits{}},
		{"a zip symlink out", kubetorch.FormatZip, "l", zipOf(t, entry{name: "l", kind: tar.TypeSymlink, link: "/etc/shadow"}), kubetorch.Limits{}},
		// a/b/s resolves inside (to d), but on disk a/b/s/x then lives in
		// d, and its ../../../y leaves the root: no lexical check sees it.
		{"a link under a link", kubetorch.FormatTarGz, "a/b/s/x", tarGz(t,
			entry{name: "a/b/s", kind: tar.TypeSymlink, link: "../../d"},
			entry{name: "a/b/s/x", kind: tar.TypeSymlink, link: "../../../y"}), kubetorch.Limits{}},
		{"a file under a link", kubetorch.FormatTarGz, "a/s/evil.py", tarGz(t,
			entry{name: "a/s", kind: tar.TypeSymlink, link: "../d"},
			entry{name: "a/s/evil.py", body: "x"}), kubetorch.Limits{}},
		{"a link through a link", kubetorch.FormatTarGz, "t", tarGz(t,
			entry{name: "a/b/s", kind: tar.TypeSymlink, link: "../../d"},
			entry{name: "t", kind: tar.TypeSymlink, link: "a/b/s/../../../x"}), kubetorch.Limits{}},
		{"a link over entries", kubetorch.FormatTarGz, "a", tarGz(t,
			entry{name: "a/x.py", body: "x"},
			entry{name: "a", kind: tar.TypeSymlink, link: "b"}), kubetorch.Limits{}},
		{"a zip link under a link", kubetorch.FormatZip, "a/b/s/x", zipOf(t,
			entry{name: "a/b/s", kind: tar.TypeSymlink, link: "../../d"},
			entry{name: "a/b/s/x", kind: tar.TypeSymlink, link: "../../../y"}), kubetorch.Limits{}},
		{"a zip bomb", kubetorch.FormatZip, "zeros", zipOf(t, entry{name: "zeros", body: zeros}), kubetorch.Limits{}},
		{"a zip duplicate", kubetorch.FormatZip, "d", zipOf(t, entry{name: "d", body: "1"}, entry{name: "d", body: "2"}), kubetorch.Limits{}},
		{"a tar.gz cut short", kubetorch.FormatTarGz, "big.py", cut, kubetorch.Limits{}},
		{"a zip with corrupt data", kubetorch.FormatZip, "a.py", corrupt, kubetorch.Limits{}},
	}
	for _, c := range cases {
		t.Run(c.what, func(t *testing.T) {
			s := &kubetorch.Store{Dir: t.TempDir(), Limits: c.limits}
			_, err := s.Put(bytes.NewReader(c.upload), c.format)
			var ee *kubetorch.EntryError
			if !errors.As(err, &ee) {
				t.Fatalf("%s: %v, want an EntryError", c.what, err)
			}
			if ee.Entry != c.entry {
				t.Errorf("%s: the error names %q, want %q (%v)", c.what, ee.Entry, c.entry, err)
			}
			if left, _ := os.ReadDir(s.Dir); len(left) != 0 {
				t.Errorf("%s: the store keeps %d files", c.what, len(left))
			}
		})
	}
	s := &kubetorch.Store{Dir: t.TempDir(), Limits: kubetorch.Limits{MaxUpload: 100}}
	if _, err := s.Put(bytes.NewReader(make([]byte, 101)), kubetorch.FormatZip); !errors.Is(err, kubetorch.ErrTooLarge) {
		t.Errorf("an upload over MaxUpload: %v", err)
	}
	for _, junk := range [][]byte{[]byte("not gzip"), nil, tarGz(t), tarGz(t, entry{name: "only-a-dir/", kind: tar.TypeDir})} {
		if _, err := s.Put(bytes.NewReader(junk), kubetorch.FormatTarGz); err == nil {
			t.Errorf("junk %q accepted", junk)
		}
	}
}

// FuzzPut: whatever the upload, Put never panics, writes nothing outside
// its directory, and a bundle it accepts holds only entries under the
// root, none escaping it.
func FuzzPut(f *testing.F) {
	f.Add(tarGz(f, entry{name: "a.py", body: "x"}), true)
	f.Add(tarGz(f, entry{name: "../a", body: "x"}), true)
	f.Add(zipOf(f, entry{name: "a/b.py", body: "x"}), false)
	f.Add([]byte("PK\x03\x04junk"), false)
	parent := f.TempDir()
	f.Fuzz(func(t *testing.T, upload []byte, targz bool) {
		dir, err := os.MkdirTemp(parent, "store-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		format := kubetorch.FormatZip
		if targz {
			format = kubetorch.FormatTarGz
		}
		s := &kubetorch.Store{Dir: filepath.Join(dir, "bundles"), Limits: kubetorch.Limits{MaxExpanded: 8 << 20}}
		b, err := s.Put(bytes.NewReader(upload), format)
		top, _ := os.ReadDir(dir)
		if len(top) != 1 || top[0].Name() != "bundles" {
			t.Fatalf("Put wrote outside its directory: %v", top)
		}
		if err != nil {
			return
		}
		zr, err := zip.OpenReader(b.Path)
		if err != nil {
			t.Fatal(err)
		}
		defer zr.Close()
		for _, f := range zr.File {
			if !strings.HasPrefix(f.Name, kubetorch.Root+"/") || slices.Contains(strings.Split(f.Name, "/"), "..") {
				t.Fatalf("an accepted bundle holds %q", f.Name)
			}
		}
	})
}

// TestPackageHoldsTheFilesAtTheTop: the package Ray holds for a bundle
// has the same entries and bytes, without the top-level directory.
func TestPackageHoldsTheFilesAtTheTop(t *testing.T) {
	s := &kubetorch.Store{Dir: t.TempDir()}
	b, err := s.Put(bytes.NewReader(tarGz(t, entry{name: "train.py", body: "print(1)\n"}, entry{name: "pkg/", kind: tar.TypeDir}, entry{name: "pkg/model.py", body: "x = 1\n"},
		entry{name: "pkg/latest.py", kind: tar.TypeSymlink, link: "model.py"}, entry{name: "lib", kind: tar.TypeSymlink, link: "pkg"},
		entry{name: "gone.py", kind: tar.TypeSymlink, link: "pkg/missing.py"})), kubetorch.FormatTarGz)
	if err != nil {
		t.Fatal(err)
	}
	var pkg bytes.Buffer
	if err := s.WritePackage(b.ID, &pkg); err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(pkg.Bytes()), int64(pkg.Len()))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range zr.File {
		r, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(r)
		r.Close()
		got[f.Name] = string(body)
	}
	// Links became copies of their targets (Ray's unzip makes no links);
	// a link to nothing is left out.
	want := map[string]string{"train.py": "print(1)\n", "pkg/": "", "pkg/model.py": "x = 1\n", "pkg/latest.py": "x = 1\n", "lib/model.py": "x = 1\n", "lib/latest.py": "x = 1\n"}
	if !maps.Equal(got, want) {
		t.Errorf("the package holds %v", got)
	}
	if uri := kubetorch.PackageURI(b.ID); uri != "gcs://_ray_pkg_"+b.ID[:32]+".zip" {
		t.Errorf("PackageURI = %s", uri)
	}
	if err := s.WritePackage(strings.Repeat("0", 64), &pkg); err == nil {
		t.Error("an unknown bundle made a package")
	}
}
