package gpus

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"gridweave.dev/gridweave/api"
	"gridweave.dev/joinkeys"
)

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func nvidia(index int, name string, mib int, uuid, driver string) GPU {
	return GPU{Index: index, Vendor: joinkeys.VendorNVIDIA, Name: name, MemoryMiB: mib, UUID: uuid, Driver: driver}
}

func amd(index int, name string, mib int, driver string) GPU {
	return GPU{Index: index, Vendor: joinkeys.VendorAMD, Name: name, MemoryMiB: mib, Driver: driver}
}

// parseCase is one parser test: the output comes from a fixture or is
// given inline; either want is set, or wantErr with the words the error
// must contain (the place and the field).
type parseCase struct {
	name     string
	fixture  string
	input    string
	want     []GPU
	wantErr  error
	wantText []string
}

func runParseCases(t *testing.T, parse func([]byte) ([]GPU, error), cases []parseCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			input := []byte(tc.input)
			if tc.fixture != "" {
				input = readFixture(t, tc.fixture)
			}
			got, err := parse(input)
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if !reflect.DeepEqual(got, tc.want) {
					t.Fatalf("got  %+v\nwant %+v", got, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("want an error wrapping %v, got GPUs %+v", tc.wantErr, got)
			}
			if got != nil {
				t.Errorf("an error came with GPUs %+v", got)
			}
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("error %q does not wrap %v", err, tc.wantErr)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Errorf("error %q is not a *ParseError", err)
			}
			for _, text := range tc.wantText {
				if !strings.Contains(err.Error(), text) {
					t.Errorf("error %q does not contain %q", err, text)
				}
			}
		})
	}
}

func TestParseNvidiaSMI(t *testing.T) {
	quadro := []GPU{
		nvidia(0, "Quadro RTX 4000", 8192, "GPU-c7b57be0-94ff-d352-a59b-d0ee00aeed43", "535.129.03"),
		nvidia(1, "Quadro RTX 4000", 8192, "GPU-d6de6afc-bdfe-75c4-5273-0544439153fc", "535.129.03"),
	}
	const goodLine = "0, Quadro RTX 4000, 8192, GPU-c7b57be0-94ff-d352-a59b-d0ee00aeed43, 535.129.03"
	runParseCases(t, ParseNvidiaSMI, []parseCase{
		{name: "two Quadro RTX 4000", fixture: "nvidia-smi/quadro-rtx4000-x2.csv", want: quadro},
		{name: "units not suppressed", fixture: "nvidia-smi/units-not-suppressed.csv", want: quadro},
		{name: "CRLF", fixture: "nvidia-smi/geforce-rtx2080-crlf.csv", want: []GPU{
			nvidia(0, "GeForce RTX 2080", 7979, "GPU-22b2c6ac-2d49-4863-197c-9c469071178a", "440.64"),
		}},
		{name: "two A100", fixture: "nvidia-smi/a100-sxm4-x2.csv", want: []GPU{
			nvidia(0, "NVIDIA A100-SXM4-40GB", 40960, "GPU-8c1f5e2a-3b7d-4a96-9e10-5d2c7f8a4b01", "580.126.09"),
			nvidia(1, "NVIDIA A100-SXM4-40GB", 40960, "GPU-0d4a7c93-6e1b-4f28-a7c5-9b3e1d6f2c12", "580.126.09"),
		}},
		{name: "no space after commas, trailing spaces, blank lines",
			input: "\n0,Quadro RTX 4000 ,8192 , GPU-c7b57be0-94ff-d352-a59b-d0ee00aeed43,535.129.03   \n\n1, Quadro RTX 4000, 8192, GPU-d6de6afc-bdfe-75c4-5273-0544439153fc, 535.129.03\n\n",
			want:  quadro},
		{name: "quoted name with a comma",
			input: `3, "NVIDIA Example, Rev. 2", 24576, GPU-0a1b2c3d-0000-1111-2222-333344445555, 550.54.15`,
			want:  []GPU{nvidia(3, "NVIDIA Example, Rev. 2", 24576, "GPU-0a1b2c3d-0000-1111-2222-333344445555", "550.54.15")}},
		{name: "indexes need not start at 0 or be in order",
			input: strings.Replace(goodLine, "0,", "5,", 1) + "\n" + strings.Replace(goodLine, "GPU-c7", "GPU-d7", 1),
			want: []GPU{
				nvidia(5, "Quadro RTX 4000", 8192, "GPU-c7b57be0-94ff-d352-a59b-d0ee00aeed43", "535.129.03"),
				nvidia(0, "Quadro RTX 4000", 8192, "GPU-d7b57be0-94ff-d352-a59b-d0ee00aeed43", "535.129.03"),
			}},

		{name: "empty output", input: "", wantErr: ErrNoGPUs, wantText: []string{"nvidia-smi", "no GPU"}},
		{name: "only blank lines", input: "\r\n\n  \n", wantErr: ErrNoGPUs},
		{name: "no devices", fixture: "nvidia-smi/no-devices.txt", wantErr: ErrNoGPUs, wantText: []string{"line 1", "no devices"}},
		{name: "driver not loaded", fixture: "nvidia-smi/driver-not-loaded.txt", wantErr: ErrToolFailed, wantText: []string{"line 1", "couldn't communicate with the NVIDIA driver"}},
		{name: "header line", fixture: "nvidia-smi/header-not-suppressed.csv", wantErr: ErrMalformedOutput, wantText: []string{"line 1", "field index", "header"}},
		{name: "memory [N/A]", fixture: "nvidia-smi/memory-not-available.csv", wantErr: ErrMalformedOutput, wantText: []string{"line 1", "field memory.total", `"[N/A]"`}},
		{name: "memory [Not Supported] on line 2",
			input:   goodLine + "\n1, Quadro RTX 4000, [Not Supported], GPU-d6de6afc-bdfe-75c4-5273-0544439153fc, 535.129.03\n",
			wantErr: ErrMalformedOutput, wantText: []string{"line 2", "field memory.total", "[Not Supported]"}},
		{name: "memory N/A", input: strings.Replace(goodLine, "8192", "N/A", 1), wantErr: ErrMalformedOutput, wantText: []string{"field memory.total", "not available"}},
		{name: "memory in GiB", input: strings.Replace(goodLine, "8192", "8 GiB", 1), wantErr: ErrMalformedOutput, wantText: []string{"field memory.total", `unit "GiB"`}},
		{name: "memory fractional", input: strings.Replace(goodLine, "8192", "8192.5", 1), wantErr: ErrMalformedOutput, wantText: []string{"field memory.total"}},
		{name: "memory zero", input: strings.Replace(goodLine, "8192", "0", 1), wantErr: ErrMalformedOutput, wantText: []string{"field memory.total", "no memory"}},
		{name: "memory negative", input: strings.Replace(goodLine, "8192", "-1", 1), wantErr: ErrMalformedOutput, wantText: []string{"field memory.total"}},
		{name: "name [Unknown Error]", input: strings.Replace(goodLine, "Quadro RTX 4000", "[Unknown Error]", 1), wantErr: ErrMalformedOutput, wantText: []string{"field name", "[Unknown Error]"}},
		{name: "name empty", input: strings.Replace(goodLine, "Quadro RTX 4000", "", 1), wantErr: ErrMalformedOutput, wantText: []string{"field name", "empty"}},
		{name: "name too long", input: strings.Replace(goodLine, "Quadro RTX 4000", strings.Repeat("x", 129), 1), wantErr: ErrMalformedOutput, wantText: []string{"field name", "129 bytes"}},
		{name: "uuid [N/A]", input: strings.Replace(goodLine, "GPU-c7b57be0-94ff-d352-a59b-d0ee00aeed43", "[N/A]", 1), wantErr: ErrMalformedOutput, wantText: []string{"field uuid", "not available"}},
		{name: "uuid not a GPU UUID", input: strings.Replace(goodLine, "GPU-", "MIG-", 1), wantErr: ErrMalformedOutput, wantText: []string{"field uuid", "MIG-"}},
		{name: "driver [N/A]", input: strings.Replace(goodLine, "535.129.03", "[N/A]", 1), wantErr: ErrMalformedOutput, wantText: []string{"field driver_version"}},
		{name: "index N/A", input: strings.Replace(goodLine, "0,", "N/A,", 1), wantErr: ErrMalformedOutput, wantText: []string{"field index", "not available"}},
		{name: "index negative", input: strings.Replace(goodLine, "0,", "-1,", 1), wantErr: ErrMalformedOutput, wantText: []string{"field index", `"-1"`}},
		{name: "index with sign", input: strings.Replace(goodLine, "0,", "+0,", 1), wantErr: ErrMalformedOutput, wantText: []string{"field index"}},
		{name: "index too large", input: strings.Replace(goodLine, "0,", "99999999999999999999,", 1), wantErr: ErrMalformedOutput, wantText: []string{"field index"}},
		{name: "duplicate index",
			input:   goodLine + "\n" + strings.Replace(goodLine, "GPU-c7", "GPU-d7", 1),
			wantErr: ErrMalformedOutput, wantText: []string{"line 2", "field index", "first on line 1"}},
		{name: "four fields (driver_version not queried)", input: "0, Quadro RTX 4000, 8192, GPU-c7b57be0-94ff-d352-a59b-d0ee00aeed43",
			wantErr: ErrMalformedOutput, wantText: []string{"line 1", "has 4 fields, want 5"}},
		{name: "unquoted comma in the name", input: "0, NVIDIA Example, Rev. 2, 24576, GPU-0a1b2c3d-0000-1111-2222-333344445555, 550.54.15",
			wantErr: ErrMalformedOutput, wantText: []string{"line 1", "has 6 fields, want 5"}},
		{name: "stray quote", input: `0, Quadro "RTX 4000, 8192, GPU-c7b57be0-94ff-d352-a59b-d0ee00aeed43, 535.129.03`,
			wantErr: ErrMalformedOutput, wantText: []string{"line 1", "CSV"}},
		{name: "the table instead of the query", input: "+-----------------------------------------------------------------------------------------+\n| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |\n",
			wantErr: ErrMalformedOutput, wantText: []string{"line 1", "has 1 fields"}},
	})
}

func TestParseNvidiaSMIEightH100(t *testing.T) {
	got, err := ParseNvidiaSMI(readFixture(t, "nvidia-smi/h100-sxm-x8.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 8 {
		t.Fatalf("got %d GPUs, want 8", len(got))
	}
	for i, g := range got {
		if g.Index != i || g.Name != "NVIDIA H100 80GB HBM3" || g.MemoryMiB != 81559 || g.Driver != "550.54.15" || g.Vendor != joinkeys.VendorNVIDIA || !strings.HasPrefix(g.UUID, "GPU-") {
			t.Errorf("GPU %d: %+v", i, g)
		}
	}
}

func TestParseAMDSMI(t *testing.T) {
	runParseCases(t, ParseAMDSMI, []parseCase{
		{name: "MI210, gpu_data shape", fixture: "amd-smi/mi210-gpu-data.json", want: []GPU{
			amd(0, "AMD Instinct MI210", 65520, "Linuxversion6.14.0-24-generic(buildd@lcy02-amd64-010)(x86_64-linux-gnu-gcc-13(Ubuntu13.3.0-6ubuntu2~24.04)13.3.0,GNUld(GNUBinutilsforUbuntu)2.42)#24~24.04.3-UbuntuSMPPREEMPT_DYNAMICMonJul716:39:17UTC2"),
		}},
		{name: "RX 7800 XT, no driver section", fixture: "amd-smi/rx7800xt-gpu-data.json", want: []GPU{
			amd(0, "AMD Radeon RX 7800 XT", 16368, ""),
		}},
		{name: "two MI300X, list shape", fixture: "amd-smi/mi300x-list.json", want: []GPU{
			amd(0, "AMD Instinct MI300X", 196592, "6.8.5"),
			amd(1, "AMD Instinct MI300X", 196592, "6.8.5"),
		}},
		{name: "market name only a PCI id", fixture: "amd-smi/mi350x-pci-id-name.json", want: []GPU{
			amd(0, "AMD Instinct MI350 OAM", 294896, "6.18.3"),
		}},
		{name: "uuid when present", input: `[{"gpu": 2, "uuid": "a4ff74a1-0000-1000-80f3-1f6e0a2b3c4d", "asic": {"market_name": "AMD Instinct MI300X"}, "vram": {"size": {"value": 196592, "unit": "MB"}}}]`,
			want: []GPU{{Index: 2, Vendor: joinkeys.VendorAMD, Name: "AMD Instinct MI300X", MemoryMiB: 196592, UUID: "a4ff74a1-0000-1000-80f3-1f6e0a2b3c4d"}}},
		{name: "uuid N/A is no uuid", input: `[{"gpu": 0, "uuid": "N/A", "asic": {"market_name": "AMD Instinct MI210"}, "vram": {"size": {"value": 65520, "unit": "MB"}}}]`,
			want: []GPU{amd(0, "AMD Instinct MI210", 65520, "")}},
		{name: "size as text", input: `[{"gpu": 0, "asic": {"market_name": "AMD Instinct MI210"}, "vram": {"size": "65520 MB"}}]`,
			want: []GPU{amd(0, "AMD Instinct MI210", 65520, "")}},
		{name: "size as a bare number of MB", input: `[{"gpu": 0, "asic": {"market_name": "AMD Instinct MI210"}, "vram": {"size": 65520}}]`,
			want: []GPU{amd(0, "AMD Instinct MI210", 65520, "")}},
		{name: "size in bytes", input: `[{"gpu": 0, "asic": {"market_name": "AMD Radeon PRO W7800"}, "vram": {"size": {"value": 34359738368, "unit": "B"}}}]`,
			want: []GPU{amd(0, "AMD Radeon PRO W7800", 32768, "")}},
		{name: "size in GB", input: `[{"gpu": 0, "asic": {"market_name": "AMD Instinct MI300X"}, "vram": {"size": {"value": 192, "unit": "GB"}}}]`,
			want: []GPU{amd(0, "AMD Instinct MI300X", 196608, "")}},
		{name: "other top-level keys beside gpu_data", input: `{"gpu_data": [{"gpu": 0, "asic": {"market_name": "AMD Instinct MI210"}, "vram": {"size": {"value": 65520, "unit": "MB"}}}], "cpu_data": []}`,
			want: []GPU{amd(0, "AMD Instinct MI210", 65520, "")}},

		{name: "vram size N/A", fixture: "amd-smi/vram-not-available.json", wantErr: ErrMalformedOutput, wantText: []string{"entry 0 (gpu 0)", "field vram.size", "not available"}},
		{name: "empty output", input: " \n", wantErr: ErrNoGPUs, wantText: []string{"amd-smi", "empty"}},
		{name: "empty list", input: "[]", wantErr: ErrNoGPUs},
		{name: "empty gpu_data", input: `{"gpu_data": []}`, wantErr: ErrNoGPUs},
		{name: "object without gpu_data", input: `{"gpu": 0}`, wantErr: ErrMalformedOutput, wantText: []string{"gpu_data"}},
		{name: "gpu_data not a list", input: `{"gpu_data": {"gpu": 0}}`, wantErr: ErrMalformedOutput, wantText: []string{"field gpu_data", "not a list"}},
		{name: "warnings before the JSON", input: "/usr/lib/python3.14/site-packages/amdsmi/amdsmi_interface.py:3569: SyntaxWarning: 'return' in a 'finally' block\n[]",
			wantErr: ErrMalformedOutput, wantText: []string{"does not start with JSON"}},
		{name: "human-readable output", input: "GPU: 0\n    ASIC:\n        MARKET_NAME: AMD Instinct MI210\n", wantErr: ErrMalformedOutput, wantText: []string{"does not start with JSON"}},
		{name: "truncated JSON", input: `[{"gpu": 0, "asic": {"market_name": "AMD Instinct MI210"}`, wantErr: ErrMalformedOutput, wantText: []string{"not a JSON list"}},
		{name: "trailing garbage", input: `[] []`, wantErr: ErrMalformedOutput},
		{name: "entry not an object", input: `[0]`, wantErr: ErrMalformedOutput, wantText: []string{"entry 0", "not a JSON object"}},
		{name: "entry null", input: `[null]`, wantErr: ErrMalformedOutput, wantText: []string{"entry 0", "not a JSON object"}},
		{name: "gpu missing", input: `[{"asic": {"market_name": "AMD Instinct MI210"}, "vram": {"size": {"value": 65520, "unit": "MB"}}}]`,
			wantErr: ErrMalformedOutput, wantText: []string{"entry 0", "field gpu", "missing"}},
		{name: "gpu negative", input: `[{"gpu": -1, "asic": {"market_name": "AMD Instinct MI210"}, "vram": {"size": {"value": 65520, "unit": "MB"}}}]`,
			wantErr: ErrMalformedOutput, wantText: []string{"field gpu", `"-1"`}},
		{name: "gpu as a string", input: `[{"gpu": "0", "asic": {"market_name": "AMD Instinct MI210"}, "vram": {"size": {"value": 65520, "unit": "MB"}}}]`,
			wantErr: ErrMalformedOutput, wantText: []string{"field gpu"}},
		{name: "gpu fractional", input: `[{"gpu": 1.5, "asic": {"market_name": "AMD Instinct MI210"}, "vram": {"size": {"value": 65520, "unit": "MB"}}}]`,
			wantErr: ErrMalformedOutput, wantText: []string{"field gpu"}},
		{name: "duplicate gpu", input: `[{"gpu": 0, "asic": {"market_name": "A"}, "vram": {"size": 1}}, {"gpu": 0, "asic": {"market_name": "A"}, "vram": {"size": 1}}]`,
			wantErr: ErrMalformedOutput, wantText: []string{"entry 1", "field gpu", "first in entry 0"}},
		{name: "no name anywhere", input: `[{"gpu": 0, "asic": {"market_name": "N/A"}, "board": {"product_name": "N/A"}, "vram": {"size": {"value": 65520, "unit": "MB"}}}]`,
			wantErr: ErrMalformedOutput, wantText: []string{"entry 0 (gpu 0)", "field asic.market_name", "names no GPU"}},
		{name: "asic N/A and no board", input: `[{"gpu": 0, "asic": "N/A", "vram": {"size": {"value": 65520, "unit": "MB"}}}]`,
			wantErr: ErrMalformedOutput, wantText: []string{"field asic.market_name"}},
		{name: "asic not an object", input: `[{"gpu": 0, "asic": 7, "vram": {"size": {"value": 65520, "unit": "MB"}}}]`,
			wantErr: ErrMalformedOutput, wantText: []string{"field asic", "not an object"}},
		{name: "market_name not a string", input: `[{"gpu": 0, "asic": {"market_name": 210}, "vram": {"size": {"value": 65520, "unit": "MB"}}}]`,
			wantErr: ErrMalformedOutput, wantText: []string{"field asic.market_name", "not a string"}},
		{name: "vram missing", input: `[{"gpu": 0, "asic": {"market_name": "AMD Instinct MI210"}}]`,
			wantErr: ErrMalformedOutput, wantText: []string{"field vram.size", "missing"}},
		{name: "vram N/A", input: `[{"gpu": 0, "asic": {"market_name": "AMD Instinct MI210"}, "vram": "N/A"}]`,
			wantErr: ErrMalformedOutput, wantText: []string{"field vram.size", "missing"}},
		{name: "size unit unknown", input: `[{"gpu": 0, "asic": {"market_name": "AMD Instinct MI210"}, "vram": {"size": {"value": 64, "unit": "TB"}}}]`,
			wantErr: ErrMalformedOutput, wantText: []string{"field vram.size", `"TB"`}},
		{name: "size without unit", input: `[{"gpu": 0, "asic": {"market_name": "AMD Instinct MI210"}, "vram": {"size": {"value": 65520}}}]`,
			wantErr: ErrMalformedOutput, wantText: []string{"field vram.size", "no unit"}},
		{name: "size zero", input: `[{"gpu": 0, "asic": {"market_name": "AMD Instinct MI210"}, "vram": {"size": {"value": 0, "unit": "MB"}}}]`,
			wantErr: ErrMalformedOutput, wantText: []string{"field vram.size", "less than 1 MiB"}},
		{name: "size fractional", input: `[{"gpu": 0, "asic": {"market_name": "AMD Instinct MI210"}, "vram": {"size": {"value": 63.98, "unit": "GB"}}}]`,
			wantErr: ErrMalformedOutput, wantText: []string{"field vram.size", `"63.98"`}},
		{name: "size enormous", input: `[{"gpu": 0, "asic": {"market_name": "AMD Instinct MI210"}, "vram": {"size": {"value": 999999999999999999, "unit": "GB"}}}]`,
			wantErr: ErrMalformedOutput, wantText: []string{"field vram.size", "more memory"}},
		{name: "driver version not a string", input: `[{"gpu": 0, "asic": {"market_name": "AMD Instinct MI210"}, "vram": {"size": 65520}, "driver": {"version": 6}}]`,
			wantErr: ErrMalformedOutput, wantText: []string{"field driver.version"}},
	})
}

func TestReports(t *testing.T) {
	if got := Reports(nil); got == nil || len(got) != 0 {
		t.Errorf("a CPU-only node reports %#v, want an empty list (never null on the wire)", got)
	}
	got := Reports([]GPU{nvidia(1, "NVIDIA H100 80GB HBM3", 81559, "GPU-1", "550.54.15")})
	want := []api.GPU{{Index: 1, Vendor: "nvidia", Name: "NVIDIA H100 80GB HBM3", MemoryMiB: 81559, UUID: "GPU-1"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

// fakeMachine is a machine with some tools installed, each answering with
// fixed output and error.
type fakeMachine struct {
	installed map[string]fakeTool
	ran       []string // the commands run, name and arguments
}

type fakeTool struct {
	out []byte
	err error
}

func (m *fakeMachine) options() *Options {
	return &Options{
		LookPath: func(file string) (string, error) {
			if _, ok := m.installed[file]; !ok {
				return "", &exec.Error{Name: file, Err: exec.ErrNotFound}
			}
			return "/usr/bin/" + file, nil
		},
		Run: func(ctx context.Context, name string, args ...string) ([]byte, error) {
			m.ran = append(m.ran, strings.Join(append([]string{name}, args...), " "))
			tool := m.installed[filepath.Base(name)]
			return tool.out, tool.err
		},
	}
}

func TestDetect(t *testing.T) {
	quadro := readFixture(t, "nvidia-smi/quadro-rtx4000-x2.csv")
	mi300x := readFixture(t, "amd-smi/mi300x-list.json")
	exit := func(code int) error { return fmt.Errorf("exit status %d", code) }
	const nvidiaCommand = "/usr/bin/nvidia-smi --query-gpu=index,name,memory.total,uuid,driver_version --format=csv,noheader,nounits"
	const amdCommand = "/usr/bin/amd-smi static --json"

	tests := []struct {
		name      string
		installed map[string]fakeTool
		wantGPUs  int
		wantRan   []string
		wantErr   error
		wantText  []string
	}{
		{name: "neither tool: CPU-only", installed: nil, wantGPUs: 0},
		{name: "nvidia-smi", installed: map[string]fakeTool{"nvidia-smi": {out: quadro}},
			wantGPUs: 2, wantRan: []string{nvidiaCommand}},
		{name: "amd-smi", installed: map[string]fakeTool{"amd-smi": {out: mi300x}},
			wantGPUs: 2, wantRan: []string{amdCommand}},
		{name: "both: nvidia-smi wins", installed: map[string]fakeTool{"nvidia-smi": {out: quadro}, "amd-smi": {out: mi300x}},
			wantGPUs: 2, wantRan: []string{nvidiaCommand}},
		{name: "nvidia-smi without a driver", installed: map[string]fakeTool{
			"nvidia-smi": {out: readFixture(t, "nvidia-smi/driver-not-loaded.txt"), err: exit(9)},
			"amd-smi":    {out: mi300x},
		}, wantRan: []string{nvidiaCommand}, wantErr: ErrToolFailed,
			wantText: []string{"nvidia-smi is installed", "driver loaded", "exit status 9", "couldn't communicate with the NVIDIA driver"}},
		{name: "nvidia-smi without a driver, message on stderr", installed: map[string]fakeTool{
			"nvidia-smi": {err: errors.New("exit status 9: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")},
		}, wantRan: []string{nvidiaCommand}, wantErr: ErrToolFailed, wantText: []string{"driver loaded"}},
		{name: "nvidia-smi sees no devices", installed: map[string]fakeTool{
			"nvidia-smi": {out: readFixture(t, "nvidia-smi/no-devices.txt"), err: exit(6)},
		}, wantRan: []string{nvidiaCommand}, wantErr: ErrNoGPUs, wantText: []string{"no devices", "exit status 6"}},
		{name: "nvidia-smi output malformed", installed: map[string]fakeTool{
			"nvidia-smi": {out: readFixture(t, "nvidia-smi/memory-not-available.csv")},
			"amd-smi":    {out: mi300x},
		}, wantRan: []string{nvidiaCommand}, wantErr: ErrMalformedOutput, wantText: []string{"line 1", "memory.total"}},
		{name: "nvidia-smi prints nothing", installed: map[string]fakeTool{"nvidia-smi": {}},
			wantRan: []string{nvidiaCommand}, wantErr: ErrNoGPUs},
		{name: "amd-smi fails", installed: map[string]fakeTool{
			"amd-smi": {err: errors.New("exit status 1: AmdSmiLibraryException: Error code: 34 | AMDSMI_STATUS_DRIVER_NOT_LOADED")},
		}, wantRan: []string{amdCommand}, wantErr: ErrToolFailed, wantText: []string{"amd-smi (/usr/bin/amd-smi) is installed but failed", "DRIVER_NOT_LOADED"}},
		{name: "amd-smi output malformed", installed: map[string]fakeTool{
			"amd-smi": {out: readFixture(t, "amd-smi/vram-not-available.json")},
		}, wantRan: []string{amdCommand}, wantErr: ErrMalformedOutput, wantText: []string{"vram.size"}},
		{name: "amd-smi lists no GPU", installed: map[string]fakeTool{"amd-smi": {out: []byte("[]\n")}},
			wantRan: []string{amdCommand}, wantErr: ErrNoGPUs},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			machine := &fakeMachine{installed: tc.installed}
			got, err := Detect(context.Background(), machine.options())
			if !reflect.DeepEqual(machine.ran, tc.wantRan) {
				t.Errorf("ran %q, want %q", machine.ran, tc.wantRan)
			}
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if len(got) != tc.wantGPUs {
					t.Fatalf("got %d GPUs, want %d: %+v", len(got), tc.wantGPUs, got)
				}
				if tc.wantGPUs == 0 && got != nil {
					t.Errorf("CPU-only is %#v, want nil", got)
				}
				return
			}
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v does not wrap %v", err, tc.wantErr)
			}
			if got != nil {
				t.Errorf("an error came with GPUs %+v", got)
			}
			for _, text := range tc.wantText {
				if !strings.Contains(err.Error(), text) {
					t.Errorf("error %q does not contain %q", err, text)
				}
			}
		})
	}
}

func TestDetectLookPathFailure(t *testing.T) {
	denied := errors.New("permission denied")
	opts := &Options{
		LookPath: func(string) (string, error) { return "", denied },
		Run: func(context.Context, string, ...string) ([]byte, error) {
			t.Error("ran a tool LookPath could not find")
			return nil, nil
		},
	}
	_, err := Detect(context.Background(), opts)
	if !errors.Is(err, denied) || !strings.Contains(err.Error(), "nvidia-smi") {
		t.Errorf("got %v, want an error about looking for nvidia-smi wrapping %v", err, denied)
	}
}

func TestDetectTimeout(t *testing.T) {
	opts := &Options{
		LookPath: func(file string) (string, error) { return "/usr/bin/" + file, nil },
		Run: func(ctx context.Context, _ string, _ ...string) ([]byte, error) {
			<-ctx.Done()
			return nil, errors.New("signal: killed")
		},
		Timeout: 10 * time.Millisecond,
	}
	_, err := Detect(context.Background(), opts)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrToolFailed) {
		t.Errorf("got %v, want a tool failure wrapping context.DeadlineExceeded", err)
	}
}

// TestRunCommand runs the default runner on a real process.
func TestRunCommand(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh:", err)
	}
	out, err := runCommand(context.Background(), sh, "-c", "echo '0, GPU'; echo warning >&2; echo 'driver gone' >&2; exit 9")
	if string(out) != "0, GPU\n" {
		t.Errorf("stdout = %q", out)
	}
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 9 || !strings.Contains(err.Error(), "warning | driver gone") {
		t.Errorf("err = %v, want exit status 9 with the standard error's lines", err)
	}
	out, err = runCommand(context.Background(), sh, "-c", "echo ok")
	if err != nil || string(out) != "ok\n" {
		t.Errorf("got %q, %v", out, err)
	}
}
