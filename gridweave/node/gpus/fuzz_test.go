package gpus

import (
	"os"
	"path/filepath"
	"testing"
)

func addFixtures(f *testing.F, dir string) {
	f.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", dir, "*"))
	if err != nil {
		f.Fatal(err)
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// checkParsed holds a parser's success to the package's promise: every GPU
// has the vendor, a non-negative index distinct from the others', a name
// and positive memory.
func checkParsed(t *testing.T, vendor string, gpus []GPU, err error) {
	t.Helper()
	if err != nil {
		if gpus != nil {
			t.Fatalf("an error (%v) came with GPUs %+v", err, gpus)
		}
		return
	}
	if len(gpus) == 0 {
		t.Fatal("success with no GPUs")
	}
	seen := map[int]bool{}
	for _, g := range gpus {
		if g.Vendor != vendor || g.Index < 0 || seen[g.Index] || g.Name == "" || g.MemoryMiB <= 0 || len(g.Name) > maxTextLen || len(g.UUID) > maxTextLen {
			t.Fatalf("bad GPU %+v in %+v", g, gpus)
		}
		seen[g.Index] = true
	}
}

func FuzzParseNvidiaSMI(f *testing.F) {
	addFixtures(f, "nvidia-smi")
	f.Add([]byte(`0, "A, B", 1, GPU-x, 1` + "\n1,B,2,GPU-y,2\r\n"))
	f.Fuzz(func(t *testing.T, out []byte) {
		gpus, err := ParseNvidiaSMI(out)
		checkParsed(t, "nvidia", gpus, err)
	})
}

func FuzzParseAMDSMI(f *testing.F) {
	addFixtures(f, "amd-smi")
	f.Add([]byte(`[{"gpu": 0, "asic": "N/A", "board": {"product_name": "X"}, "vram": {"size": "1 GB"}, "uuid": "u"}]`))
	f.Add([]byte(`{"gpu_data": [{"gpu": 1, "asic": {"market_name": "0x1"}, "vram": {"size": {"value": 1048576, "unit": "B"}}}]}`))
	f.Fuzz(func(t *testing.T, out []byte) {
		gpus, err := ParseAMDSMI(out)
		checkParsed(t, "amd", gpus, err)
	})
}
