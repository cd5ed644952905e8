package scrapetargets_test

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"gridweave.dev/gridweave/scrapetargets"
)

func newDir(t *testing.T) *scrapetargets.Dir {
	t.Helper()
	d, err := scrapetargets.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func h100Node(hostname, ip string) scrapetargets.Target {
	return scrapetargets.Target{
		Hostname: hostname,
		VPNIP:    netip.MustParseAddr(ip),
		GPUModel: "NVIDIA H100 80GB HBM3",
		GPUCount: 8,
	}
}

// dirNames lists the names in dir, sorted.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names
}

func TestWriteContent(t *testing.T) {
	tests := []struct {
		name   string
		target scrapetargets.Target
		file   string
		want   string
	}{
		{
			name:   "IPv4 on the default port",
			target: h100Node("gpu-node-1", "198.18.0.7"),
			file:   "gpu-node-1.json",
			want: `[
  {
    "targets": [
      "198.18.0.7:9400"
    ],
    "labels": {
      "gpu_count": "8",
      "gpu_model": "NVIDIA H100 80GB HBM3",
      "hostname": "gpu-node-1",
      "node": "gpu-node-1"
    }
  }
]
`,
		},
		{
			name: "IPv6 on another port",
			target: scrapetargets.Target{
				Hostname: "a100-2",
				VPNIP:    netip.MustParseAddr("fd00::2"),
				Port:     9500,
				GPUModel: `NVIDIA A100-SXM4-40GB "rev 1"`,
				GPUCount: 4,
			},
			file: "a100-2.json",
			want: `[
  {
    "targets": [
      "[fd00::2]:9500"
    ],
    "labels": {
      "gpu_count": "4",
      "gpu_model": "NVIDIA A100-SXM4-40GB \"rev 1\"",
      "hostname": "a100-2",
      "node": "a100-2"
    }
  }
]
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDir(t)
			if err := d.Write(t.Context(), tt.target); err != nil {
				t.Fatal(err)
			}
			if got := dirNames(t, d.Path()); !slices.Equal(got, []string{tt.file}) {
				t.Fatalf("directory holds %q, want only %q (no temporary file left)", got, tt.file)
			}
			path := filepath.Join(d.Path(), tt.file)
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("content:\n%s\nwant:\n%s", got, tt.want)
			}
			info, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if perm := info.Mode().Perm(); perm != 0o644 {
				t.Errorf("file mode %v, want 0644 so a Prometheus running as another user can read it", perm)
			}
		})
	}
}

func TestWriteSameContentLeavesFileAlone(t *testing.T) {
	d := newDir(t)
	target := h100Node("gpu-node-1", "198.18.0.7")
	path := filepath.Join(d.Path(), "gpu-node-1.json")
	if err := d.Write(t.Context(), target); err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Write(t.Context(), target); err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) || !after.ModTime().Equal(before.ModTime()) {
		t.Error("writing the same target again replaced the file; Prometheus would reload for nothing")
	}

	target.GPUCount = 4
	if err := d.Write(t.Context(), target); err != nil {
		t.Fatal(err)
	}
	changed, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if os.SameFile(after, changed) {
		t.Error("a changed target was written in place, not renamed over the file")
	}
}

// TestWriteIsAtomic rewrites one node's file from two goroutines, with
// contents of very different lengths, while a reader reads it and globs the
// directory the way Prometheus does: every read is one whole content, and
// the glob only ever finds the node's file, never a temporary one.
func TestWriteIsAtomic(t *testing.T) {
	const writesPerWriter = 150

	d := newDir(t)
	short := h100Node("gpu-node-1", "198.18.0.7")
	long := short
	long.GPUModel = strings.Repeat("NVIDIA H100 80GB HBM3 ", 400) + "end"
	long.GPUCount = 16
	if err := d.Write(t.Context(), short); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(d.Path(), "gpu-node-1.json")
	shortContent, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Write(t.Context(), long); err != nil {
		t.Fatal(err)
	}
	longContent, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	var writers sync.WaitGroup
	writeErrs := make(chan error, 2)
	for _, pair := range [][2]scrapetargets.Target{{short, long}, {long, short}} {
		writers.Go(func() {
			for i := range writesPerWriter {
				if err := d.Write(context.Background(), pair[i%2]); err != nil {
					writeErrs <- err
					return
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { writers.Wait(); close(done) }()

	reads := 0
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true // one more round after the last write
		default:
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("read %d: %v (the file must exist throughout)", reads, err)
		}
		if string(got) != string(shortContent) && string(got) != string(longContent) {
			t.Fatalf("read %d saw a partial or mixed file of %d bytes (whole ones have %d and %d)", reads, len(got), len(shortContent), len(longContent))
		}
		matches, err := filepath.Glob(filepath.Join(d.Path(), "*.json"))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(matches, []string{path}) {
			t.Fatalf("a *.json glob found %q, want only %s", matches, path)
		}
		reads++
	}
	close(writeErrs)
	for err := range writeErrs {
		t.Error(err)
	}
	if got := dirNames(t, d.Path()); !slices.Equal(got, []string{"gpu-node-1.json"}) {
		t.Errorf("after the writes the directory holds %q, want only gpu-node-1.json", got)
	}
	t.Logf("%d reads during %d writes", reads, 2*writesPerWriter)
}

func TestWriteManyNodesConcurrently(t *testing.T) {
	d := newDir(t)
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	var want []string
	for i := range 20 {
		hostname := "gpu-" + string(rune('a'+i))
		want = append(want, hostname+".json")
		wg.Go(func() {
			errs <- d.Write(context.Background(), h100Node(hostname, netip.AddrFrom4([4]byte{198, 18, 0, byte(10 + i)}).String()))
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if got := dirNames(t, d.Path()); !slices.Equal(got, want) {
		t.Errorf("directory holds %q, want %q", got, want)
	}
}

func TestRemove(t *testing.T) {
	d := newDir(t)
	if err := d.Write(t.Context(), h100Node("gpu-node-1", "198.18.0.7")); err != nil {
		t.Fatal(err)
	}
	if err := d.Write(t.Context(), h100Node("gpu-node-2", "198.18.0.8")); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := d.Remove("gpu-node-1"); err != nil {
			t.Fatalf("remove %d: %v", i+1, err)
		}
	}
	if err := d.Remove("never-written"); err != nil {
		t.Errorf("removing a node that has no file: %v, want nil", err)
	}
	if got := dirNames(t, d.Path()); !slices.Equal(got, []string{"gpu-node-2.json"}) {
		t.Errorf("directory holds %q, want only gpu-node-2.json", got)
	}
}

func TestBadHostnames(t *testing.T) {
	for _, hostname := range []string{
		"",
		"a/b",
		"../escape",
		"..",
		".",
		`a\b`,
		"/etc/passwd",
		"a.b",
		"Node1",
		"-node",
		"node-",
		"node_1",
		"node 1",
		"nöde",
		strings.Repeat("a", 64),
	} {
		t.Run(hostname, func(t *testing.T) {
			parent := t.TempDir()
			d, err := scrapetargets.New(filepath.Join(parent, "targets"))
			if err != nil {
				t.Fatal(err)
			}
			target := h100Node(hostname, "198.18.0.7")
			if err := d.Write(t.Context(), target); !errors.Is(err, scrapetargets.ErrInvalidHostname) {
				t.Errorf("Write: %v, want ErrInvalidHostname", err)
			}
			if err := d.Remove(hostname); !errors.Is(err, scrapetargets.ErrInvalidHostname) {
				t.Errorf("Remove: %v, want ErrInvalidHostname", err)
			}
			if got := dirNames(t, d.Path()); len(got) != 0 {
				t.Errorf("the targets directory holds %q, want nothing", got)
			}
			if got := dirNames(t, parent); !slices.Equal(got, []string{"targets"}) {
				t.Errorf("the parent directory holds %q, want only the targets directory", got)
			}
		})
	}
	longest := strings.Repeat("a", 63)
	if err := scrapetargets.ValidateHostname(longest); err != nil {
		t.Errorf("a 63-character label: %v", err)
	}
}

func TestInvalidTargets(t *testing.T) {
	valid := h100Node("gpu-node-1", "198.18.0.7")
	tests := []struct {
		name   string
		change func(*scrapetargets.Target)
	}{
		{"no VPN IP", func(t *scrapetargets.Target) { t.VPNIP = netip.Addr{} }},
		{"unspecified VPN IP", func(t *scrapetargets.Target) { t.VPNIP = netip.IPv4Unspecified() }},
		{"zoned VPN IP", func(t *scrapetargets.Target) { t.VPNIP = netip.MustParseAddr("fe80::1%wg0") }},
		{"negative port", func(t *scrapetargets.Target) { t.Port = -1 }},
		{"port too large", func(t *scrapetargets.Target) { t.Port = 65536 }},
		{"no GPU model", func(t *scrapetargets.Target) { t.GPUModel = "" }},
		{"GPU model not UTF-8", func(t *scrapetargets.Target) { t.GPUModel = "H100\xff" }},
		{"no GPUs", func(t *scrapetargets.Target) { t.GPUCount = 0 }},
		{"negative GPU count", func(t *scrapetargets.Target) { t.GPUCount = -2 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDir(t)
			target := valid
			tt.change(&target)
			err := d.Write(t.Context(), target)
			if !errors.Is(err, scrapetargets.ErrInvalidTarget) {
				t.Fatalf("Write: %v, want ErrInvalidTarget", err)
			}
			if !strings.Contains(err.Error(), `"gpu-node-1"`) {
				t.Errorf("error %q does not name the node", err)
			}
			if got := dirNames(t, d.Path()); len(got) != 0 {
				t.Errorf("directory holds %q, want nothing", got)
			}
		})
	}
}

func TestWriteHonoursContext(t *testing.T) {
	d := newDir(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := d.Write(ctx, h100Node("gpu-node-1", "198.18.0.7")); !errors.Is(err, context.Canceled) {
		t.Errorf("Write with a cancelled context: %v, want context.Canceled", err)
	}
	if got := dirNames(t, d.Path()); len(got) != 0 {
		t.Errorf("directory holds %q, want nothing", got)
	}
}

func TestListRoundTrip(t *testing.T) {
	d := newDir(t)
	written := []scrapetargets.Target{
		h100Node("gpu-node-2", "198.18.0.8"),
		h100Node("gpu-node-1", "198.18.0.7"),
		{Hostname: "a100-1", VPNIP: netip.MustParseAddr("fd00::9"), Port: 9500, GPUModel: "NVIDIA A100-SXM4-40GB", GPUCount: 2},
	}
	for _, target := range written {
		if err := d.Write(t.Context(), target); err != nil {
			t.Fatal(err)
		}
	}
	// Entries that are not ours: List skips them.
	for name, content := range map[string]string{
		"README":      "not a target file",
		"other.yaml":  "- targets: []",
		"Upper.json":  "[]",
		"not_ok.json": "[]",
	} {
		if err := os.WriteFile(filepath.Join(d.Path(), name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(d.Path(), "subdir.json"), 0o755); err != nil {
		t.Fatal(err)
	}

	got, err := d.List()
	if err != nil {
		t.Fatal(err)
	}
	want := []scrapetargets.Target{written[2], written[1], written[0]} // by hostname
	for i := range want {
		if want[i].Port == 0 {
			want[i].Port = scrapetargets.DefaultPort
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("List:\n got %+v\nwant %+v", got, want)
	}

	// A target read back writes the same bytes, so a reconcile that
	// writes what it listed changes nothing.
	before, err := os.Stat(filepath.Join(d.Path(), "gpu-node-1.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range got {
		if err := d.Write(t.Context(), target); err != nil {
			t.Fatal(err)
		}
	}
	after, err := os.Stat(filepath.Join(d.Path(), "gpu-node-1.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) {
		t.Error("writing back a listed target replaced its file")
	}

	if err := d.Remove("gpu-node-2"); err != nil {
		t.Fatal(err)
	}
	got, err = d.List()
	if err != nil {
		t.Fatal(err)
	}
	if want := []scrapetargets.Target{want[0], want[1]}; !slices.Equal(got, want) {
		t.Errorf("List after Remove:\n got %+v\nwant %+v", got, want)
	}
}

func TestListEmpty(t *testing.T) {
	got, err := newDir(t).List()
	if err != nil || len(got) != 0 {
		t.Errorf("List of an empty directory: %v, %v; want nothing", got, err)
	}
}

func TestListRefusesMalformedFiles(t *testing.T) {
	for name, content := range map[string]string{
		"not JSON":          "{",
		"two groups":        `[{"targets":["198.18.0.7:9400"],"labels":{}},{"targets":[],"labels":{}}]`,
		"two targets":       `[{"targets":["198.18.0.7:9400","198.18.0.8:9400"],"labels":{"node":"gpu-node-1","hostname":"gpu-node-1","gpu_model":"H100","gpu_count":"8"}}]`,
		"no port":           `[{"targets":["198.18.0.7"],"labels":{"node":"gpu-node-1","hostname":"gpu-node-1","gpu_model":"H100","gpu_count":"8"}}]`,
		"no gpu_model":      `[{"targets":["198.18.0.7:9400"],"labels":{"node":"gpu-node-1","hostname":"gpu-node-1","gpu_count":"8"}}]`,
		"hostname mismatch": `[{"targets":["198.18.0.7:9400"],"labels":{"node":"gpu-node-9","hostname":"gpu-node-9","gpu_model":"H100","gpu_count":"8"}}]`,
		"count not number":  `[{"targets":["198.18.0.7:9400"],"labels":{"node":"gpu-node-1","hostname":"gpu-node-1","gpu_model":"H100","gpu_count":"eight"}}]`,
		"unknown field":     `[{"targets":["198.18.0.7:9400"],"labels":{"node":"gpu-node-1","hostname":"gpu-node-1","gpu_model":"H100","gpu_count":"8"},"extra":1}]`,
		"trailing data":     `[{"targets":["198.18.0.7:9400"],"labels":{"node":"gpu-node-1","hostname":"gpu-node-1","gpu_model":"H100","gpu_count":"8"}}] []`,
	} {
		t.Run(name, func(t *testing.T) {
			d := newDir(t)
			if err := os.WriteFile(filepath.Join(d.Path(), "gpu-node-1.json"), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := d.List()
			if !errors.Is(err, scrapetargets.ErrMalformedFile) {
				t.Fatalf("List: %v, want ErrMalformedFile", err)
			}
			if !strings.Contains(err.Error(), "gpu-node-1.json") {
				t.Errorf("error %q does not name the file", err)
			}
			// Write repairs it.
			if err := d.Write(t.Context(), h100Node("gpu-node-1", "198.18.0.7")); err != nil {
				t.Fatal(err)
			}
			if _, err := d.List(); err != nil {
				t.Errorf("List after Write: %v", err)
			}
		})
	}
}

func TestNew(t *testing.T) {
	t.Run("creates a missing directory", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "var", "dcgm-targets")
		d, err := scrapetargets.New(path)
		if err != nil {
			t.Fatal(err)
		}
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if !info.IsDir() || d.Path() != path {
			t.Errorf("New(%s): mode %v, Path %s", path, info.Mode(), d.Path())
		}
	})
	t.Run("refuses a file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "targets")
		if err := os.WriteFile(path, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := scrapetargets.New(path)
		if err == nil || !strings.Contains(err.Error(), "is not a directory") || !strings.Contains(err.Error(), path) {
			t.Errorf("New on a regular file: %v, want an error saying %s is not a directory", err, path)
		}
	})
	t.Run("refuses a path under a file", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "targets")
		if err := os.WriteFile(file, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := scrapetargets.New(filepath.Join(file, "sub")); err == nil {
			t.Error("New under a regular file succeeded")
		}
	})
	t.Run("refuses an empty path", func(t *testing.T) {
		if _, err := scrapetargets.New(""); err == nil {
			t.Error("New(\"\") succeeded")
		}
	})
	t.Run("removes leftover temporary files only", func(t *testing.T) {
		path := t.TempDir()
		keep := []string{".hidden", ".gpu-node-1.json", "gpu-node-1.json", "README"}
		for _, name := range append([]string{".gpu-node-1.json.tmp-123456", ".gpu-node-2.json.tmp-99"}, keep...) {
			if err := os.WriteFile(filepath.Join(path, name), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := scrapetargets.New(path); err != nil {
			t.Fatal(err)
		}
		want := slices.Sorted(slices.Values(keep))
		if got := dirNames(t, path); !slices.Equal(got, want) {
			t.Errorf("directory holds %q, want %q", got, want)
		}
	})
}
