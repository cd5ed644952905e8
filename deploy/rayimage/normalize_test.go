package rayimage

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// rawTar is a root filesystem's tar as mmdebstrap writes one, its
// timestamps and owner names from the build.
func rawTar(t *testing.T, when time.Time) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(h *tar.Header, data string) {
		h.ModTime, h.AccessTime, h.ChangeTime, h.Uname, h.Gname, h.Format = when, when, when, "root", "root", tar.FormatPAX
		h.Size = int64(len(data))
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, data); err != nil {
			t.Fatal(err)
		}
	}
	add(&tar.Header{Typeflag: tar.TypeDir, Name: "./", Mode: 0o755}, "")
	add(&tar.Header{Typeflag: tar.TypeDir, Name: "./dev/", Mode: 0o755}, "")
	add(&tar.Header{Typeflag: tar.TypeChar, Name: "./dev/null", Mode: 0o666, Devmajor: 1, Devminor: 3}, "")
	add(&tar.Header{Typeflag: tar.TypeReg, Name: "./etc/hostname", Mode: 0o644}, "build-machine\n")
	add(&tar.Header{Typeflag: tar.TypeReg, Name: "./etc/passwd", Mode: 0o644}, "ray:x:1000:100::/home/ray:/bin/bash\n")
	add(&tar.Header{Typeflag: tar.TypeReg, Name: "./etc/resolv.conf", Mode: 0o644}, "nameserver 10.255.255.53\n")
	add(&tar.Header{Typeflag: tar.TypeDir, Name: "./home/ray/", Mode: 0o755, Uid: 1000, Gid: 100}, "")
	add(&tar.Header{Typeflag: tar.TypeReg, Name: "./usr/bin/perl", Mode: 0o755}, "#!perl")
	add(&tar.Header{Typeflag: tar.TypeLink, Name: "./usr/bin/perl5.36.0", Linkname: "./usr/bin/perl"}, "")
	add(&tar.Header{Typeflag: tar.TypeSymlink, Name: "./usr/bin/python", Linkname: "python3"}, "")
	add(&tar.Header{Typeflag: tar.TypeDir, Name: "./var/log/", Mode: 0o755}, "")
	add(&tar.Header{Typeflag: tar.TypeReg, Name: "./var/log/dpkg.log", Mode: 0o644}, when.String())
	add(&tar.Header{Typeflag: tar.TypeReg, Name: "./var/cache/ldconfig/aux-cache", Mode: 0o600}, when.String())
	add(&tar.Header{Typeflag: tar.TypeReg, Name: "./var/lib/apt/lists/deb.debian.org_InRelease", Mode: 0o644}, when.String())
	add(&tar.Header{Typeflag: tar.TypeReg, Name: "./var/lib/dpkg/status", Mode: 0o644}, "Package: bash\n")
	add(&tar.Header{Typeflag: tar.TypeReg, Name: "./var/lib/dpkg/status-old", Mode: 0o644}, when.String())
	add(&tar.Header{Typeflag: tar.TypeReg, Name: "./var/cache/debconf/config.dat", Mode: 0o644}, "Name: x\n")
	add(&tar.Header{Typeflag: tar.TypeReg, Name: "./var/cache/debconf/config.dat-old", Mode: 0o644}, when.String())
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func normalized(t *testing.T, raw []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := normalize(bytes.NewReader(raw), &out); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// TestNormalizeKeepsTheFilesystemAndDropsTheRun: two installs made at
// different times give the same layer, byte for byte; what a run leaves
// behind (logs, caches, backups, device nodes) is out, the rest is in with
// its owner, mode and links, every timestamp the epoch.
func TestNormalizeKeepsTheFilesystemAndDropsTheRun(t *testing.T) {
	first := normalized(t, rawTar(t, time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)))
	second := normalized(t, rawTar(t, time.Date(2026, 12, 4, 11, 30, 0, 0, time.UTC)))
	if !bytes.Equal(first, second) {
		t.Fatal("two installs of the same files made different layers")
	}
	var names []string
	tr := tar.NewReader(bytes.NewReader(first))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if !h.ModTime.Equal(epoch) || h.Uname != "" || h.Gname != "" || len(h.PAXRecords) > 0 {
			t.Errorf("%s: mtime %v, owner names %q/%q, PAX %v: want the epoch and none", h.Name, h.ModTime, h.Uname, h.Gname, h.PAXRecords)
		}
		switch h.Name {
		case "home/ray/":
			if h.Uid != 1000 || h.Gid != 100 {
				t.Errorf("home/ray/ owned by %d:%d, want 1000:100", h.Uid, h.Gid)
			}
		case "usr/bin/perl5.36.0":
			if h.Linkname != "usr/bin/perl" {
				t.Errorf("hard link to %q, want usr/bin/perl", h.Linkname)
			}
		case "usr/bin/python":
			if h.Linkname != "python3" {
				t.Errorf("symlink to %q, want python3", h.Linkname)
			}
		}
	}
	want := "dev/ etc/passwd home/ray/ usr/bin/perl usr/bin/perl5.36.0 usr/bin/python var/log/ var/lib/dpkg/status var/cache/debconf/config.dat"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("entries:\n got %s\nwant %s", got, want)
	}
}

func TestOptionsAreChecked(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{}, "Kind is required"},
		{Options{Kind: "gpu"}, `Kind "gpu"`},
		{Options{Kind: Worker, Extras: []string{"tensorflow"}}, `extra "tensorflow" is not one of torch`},
		{Options{Kind: Head, Mirror: "http://deb.debian.org/debian main; rm -rf /"}, "Mirror"},
		{Options{Kind: Head, Extras: []string{"torch-cpu", "torch"}}, "extras torch and torch-cpu"},
	} {
		o := tc.o
		o.CacheDir = t.TempDir()
		if err := o.check(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error saying %q", tc.o, err, tc.want)
		}
	}
}

// TestExtrasAddWhatTheyName: without extras, Ray with its dashboard on
// Packages under Constraints; torch-cpu adds Debian's torch, Ray Train
// and NumPy's last 1.x in place of Constraints' pin; torch adds PyPI's
// torch and Ray Train.
func TestExtrasAddWhatTheyName(t *testing.T) {
	for _, tc := range []struct {
		extras       []string
		requirements string
		debian       string
		pins         []string
	}{
		{nil, "ray[default]==" + RayVersion + "\n", "", []string{"numpy==2.4.6"}},
		{[]string{"torch-cpu"}, "ray[default,train]==" + RayVersion + "\n", "python3-torch", []string{"numpy==1.26.4", "pandas==2.3.3", "pyarrow==21.0.0", "pytz==2026.6"}},
		{[]string{"torch"}, "ray[default,train]==" + RayVersion + "\ntorch==2.9.1\n", "", []string{"numpy==2.4.6"}},
	} {
		o := Options{Kind: Worker, Extras: tc.extras, CacheDir: t.TempDir()}
		if err := o.check(); err != nil {
			t.Fatal(err)
		}
		if got := o.requirements(); got != tc.requirements {
			t.Errorf("%v: requirements %q, want %q", tc.extras, got, tc.requirements)
		}
		packages := o.packages()
		if !slices.Equal(packages[:len(Packages)], Packages) || tc.debian == "" && len(packages) != len(Packages) || tc.debian != "" && !slices.Contains(packages, tc.debian) {
			t.Errorf("%v: Debian packages %v", tc.extras, packages)
		}
		constraints := strings.Split(o.constraints(), "\n")
		for _, pin := range tc.pins {
			if !slices.Contains(constraints, pin) {
				t.Errorf("%v: constraints lack %s", tc.extras, pin)
			}
		}
		for _, name := range []string{"numpy", "pandas", "pyarrow"} {
			if n := len(slices.DeleteFunc(slices.Clone(constraints), func(l string) bool { return !strings.HasPrefix(l, name+"==") })); n != 1 {
				t.Errorf("%v: %d pins of %s", tc.extras, n, name)
			}
		}
	}
	if (&Options{}).constraints() != Constraints {
		t.Error("without extras the constraints are not Constraints")
	}
}

// TestExtrasPackagesOnce: an extra's Debian package that the root
// filesystem has already, or that the extra names twice, is installed
// once.
func TestExtrasPackagesOnce(t *testing.T) {
	Extras["repeats"] = Extra{Debian: []string{"extra-package", Packages[0], "extra-package"}}
	defer delete(Extras, "repeats")
	o := Options{Kind: Worker, Extras: []string{"repeats"}, CacheDir: t.TempDir()}
	if err := o.check(); err != nil {
		t.Fatal(err)
	}
	if got, want := o.packages(), append(slices.Clone(Packages), "extra-package"); !slices.Equal(got, want) {
		t.Errorf("packages %v, want %v", got, want)
	}
}

// TestPinsMatchNamesAsPipDoes: a pin replaces the constraints' line of
// its package however the line spells the name (case, "-", "_", ".",
// extras, a comment).
func TestPinsMatchNamesAsPipDoes(t *testing.T) {
	for line, want := range map[string]string{
		"typing_extensions==4.16.0\n": "typing-extensions 4.16.0", "Typing.Extensions== 4 \n": "typing-extensions 4",
		"ray[default]==2.54.0  # the head\n": "ray 2.54.0", "foo==1.0 ; python_version < '3.12'\n": "foo 1.0",
		"# numpy==2\n": "", "\n": "", "numpy>=2\n": "",
	} {
		name, version, ok := pinnedName(line)
		if got := strings.TrimSpace(name + " " + version); got != want || ok != (want != "") {
			t.Errorf("pinnedName(%q) = %q, %v; want %q", line, got, ok, want)
		}
	}
	// An extra's pins are keyed by the normalized name they pin.
	for extra, e := range Extras {
		for key, pin := range e.Pins {
			if name, _, ok := pinnedName(pin); !ok || name != key {
				t.Errorf("extra %s: pin %q under %q, not under its normalized name %q", extra, pin, key, name)
			}
		}
	}
}

// TestUnpinnedPackagesFailTheBuild: a package pip installed at a version
// the constraints do not pin (or not at all) is named; Ray is pinned by
// the requirements.
func TestUnpinnedPackagesFailTheBuild(t *testing.T) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	site := "usr/local/lib/python" + PythonVersion + "/dist-packages/"
	for _, dir := range []string{"ray-" + RayVersion + ".dist-info/", "typing_extensions-4.16.0.dist-info/", "pytz-2026.6.dist-info/", "numpy-2.4.6.dist-info/", "numpy/"} {
		_ = tw.WriteHeader(&tar.Header{Name: site + dir, Typeflag: tar.TypeDir, Mode: 0o755})
	}
	_ = tw.Close()
	path := filepath.Join(t.TempDir(), "rootfs.tar")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	defaults := Options{Kind: Worker}
	err := checkPinned(path, defaults.requirements()+Constraints)
	if err == nil || !strings.Contains(err.Error(), "pytz==2026.6") || strings.Contains(err.Error(), "numpy") || strings.Contains(err.Error(), "typing") || strings.Contains(err.Error(), "ray==") {
		t.Errorf("checkPinned with the default constraints: %v; want only pytz named", err)
	}
	cpu := Options{Kind: Worker, Extras: []string{"torch-cpu"}}
	if err := checkPinned(path, cpu.requirements()+cpu.constraints()); err == nil || !strings.Contains(err.Error(), "numpy==2.4.6") || strings.Contains(err.Error(), "pytz") {
		t.Errorf("checkPinned with torch-cpu's constraints: %v; want numpy 2.4.6 named", err)
	}
	// PyPI's torch is pinned by the torch extra's requirements.
	torch := Options{Kind: Worker, Extras: []string{"torch"}}
	if err := torch.check(); err != nil {
		t.Fatal(err)
	}
	var withTorch bytes.Buffer
	tw = tar.NewWriter(&withTorch)
	for _, dir := range []string{"ray-" + RayVersion + ".dist-info/", "torch-2.9.1.dist-info/", "nvidia_cublas_cu12-12.8.4.1.dist-info/"} {
		_ = tw.WriteHeader(&tar.Header{Name: site + dir, Typeflag: tar.TypeDir, Mode: 0o755})
	}
	_ = tw.Close()
	if err := os.WriteFile(path, withTorch.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := checkPinned(path, torch.requirements()+torch.constraints()); err != nil {
		t.Errorf("checkPinned with torch's requirements: %v", err)
	}
}

// TestTheRootFilesystemIsKeyedByItsInputs: the extras and the mirror
// change the cache key, the order or repeats of extras do not, nor does
// the image's kind alone (the head and the worker share one root
// filesystem).
func TestTheRootFilesystemIsKeyedByItsInputs(t *testing.T) {
	base := Options{Kind: Head, CacheDir: t.TempDir()}
	if err := base.check(); err != nil {
		t.Fatal(err)
	}
	worker := base
	worker.Kind = Worker
	if base.rootfsKey() != worker.rootfsKey() {
		t.Error("the head and the worker without extras have different root filesystems")
	}
	torch := worker
	torch.Extras = []string{"torch"}
	mirror := base
	mirror.Mirror = "http://mirror.example/debian"
	repeated := worker
	repeated.Extras = []string{"torch", "torch"}
	if err := repeated.check(); err != nil {
		t.Fatal(err)
	}
	if err := torch.check(); err != nil {
		t.Fatal(err)
	}
	if repeated.rootfsKey() != torch.rootfsKey() {
		t.Error("torch twice keys another root filesystem than torch once")
	}
	for what, o := range map[string]Options{"extras": torch, "mirror": mirror} {
		if o.rootfsKey() == base.rootfsKey() {
			t.Errorf("changing the %s kept the key", what)
		}
	}
}
