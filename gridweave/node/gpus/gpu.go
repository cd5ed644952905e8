package gpus

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"gridweave.dev/gridweave/api"
)

// GPU is one GPU a vendor tool reported.
type GPU struct {
	Index     int    // the tool's index, as CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES count them
	Vendor    string // joinkeys.VendorNVIDIA or joinkeys.VendorAMD
	Name      string // e.g. "NVIDIA H100 80GB HBM3", "AMD Instinct MI300X"
	MemoryMiB int    // total memory in MiB
	UUID      string // "GPU-..." for NVIDIA; empty for AMD unless the tool reports one
	Driver    string // the driver version the tool reported; may be empty for AMD
}

// Report returns g as a node reports it at register; the driver version
// is not part of it.
func (g GPU) Report() api.GPU {
	return api.GPU{Index: g.Index, Vendor: g.Vendor, Name: g.Name, MemoryMiB: g.MemoryMiB, UUID: g.UUID}
}

// Reports converts a detected list to the register request's; none is an
// empty list (a CPU-only node).
func Reports(gpus []GPU) []api.GPU {
	out := make([]api.GPU, len(gpus))
	for i, g := range gpus {
		out[i] = g.Report()
	}
	return out
}

var (
	// ErrMalformedOutput is wrapped by a *ParseError for output that does
	// not have the shape the parser expects.
	ErrMalformedOutput = errors.New("malformed GPU tool output")
	// ErrNoGPUs is wrapped when an installed tool lists no GPU: an empty
	// output, an empty list, or nvidia-smi's "No devices were found".
	ErrNoGPUs = errors.New("GPU tool is installed but lists no GPU")
	// ErrToolFailed is wrapped when an installed tool could not run or
	// reported its own failure (for nvidia-smi most often a driver that is
	// not loaded).
	ErrToolFailed = errors.New("GPU tool failed")
)

// ParseError says where a tool's output was wrong. It wraps Err, which is
// ErrMalformedOutput, ErrNoGPUs or ErrToolFailed.
type ParseError struct {
	Tool   string // "nvidia-smi" or "amd-smi"
	Where  string // "line 3" (nvidia-smi) or "entry 1" (amd-smi); empty for the output as a whole
	Field  string // e.g. "memory.total" or "vram.size"; empty for the line or entry as a whole
	Reason string
	Err    error
}

func (e *ParseError) Error() string {
	var b strings.Builder
	b.WriteString("gpus: ")
	b.WriteString(e.Tool)
	b.WriteString(" output")
	if e.Where != "" {
		b.WriteString(", ")
		b.WriteString(e.Where)
	}
	if e.Field != "" {
		b.WriteString(", field ")
		b.WriteString(e.Field)
	}
	b.WriteString(": ")
	b.WriteString(e.Reason)
	return b.String()
}

func (e *ParseError) Unwrap() error { return e.Err }

// maxTextLen is the longest name or UUID the join flow accepts
// (joinkeys validates the same bound).
const maxTextLen = 128

// unavailable reports whether a tool printed v in place of a value it
// could not read: "N/A", "[N/A]", "[Not Supported]", "[Unknown Error]",
// "[Insufficient Permissions]", "[GPU is lost]" and the like.
func unavailable(v string) bool {
	return strings.EqualFold(v, "N/A") || len(v) >= 2 && v[0] == '[' && v[len(v)-1] == ']'
}

// checkText returns why v is not acceptable as a name or UUID, or "".
func checkText(v string) string {
	switch {
	case v == "":
		return "is empty"
	case unavailable(v):
		return fmt.Sprintf("is not available (%q)", v)
	case len(v) > maxTextLen:
		return fmt.Sprintf("is %d bytes, more than the %d the join flow accepts", len(v), maxTextLen)
	case !utf8.ValidString(v):
		return fmt.Sprintf("%q is not valid UTF-8", v)
	case strings.ContainsFunc(v, unicode.IsControl):
		return fmt.Sprintf("%q contains a control character", v)
	}
	return ""
}

// quote quotes v for an error message, shortened to 64 bytes.
func quote(v string) string { return quoteUpTo(v, 64) }

func quoteUpTo(v string, max int) string {
	if len(v) > max {
		return fmt.Sprintf("%q...", v[:max])
	}
	return fmt.Sprintf("%q", v)
}

// parseCount parses a non-negative decimal integer without sign, spaces or
// leading "+", as the tools print indexes and sizes.
func parseCount(v string) (int, bool) {
	if v == "" || len(v) > 18 {
		return 0, false
	}
	n := 0
	for _, c := range []byte(v) {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}
