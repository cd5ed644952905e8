package gpus

import (
	"encoding/csv"
	"fmt"
	"strings"

	"gridweave.dev/joinkeys"
)

// nvidiaSMIArgs are the arguments Detect passes to nvidia-smi; the order of
// the queried fields is the order ParseNvidiaSMI reads.
var nvidiaSMIArgs = []string{"--query-gpu=index,name,memory.total,uuid,driver_version", "--format=csv,noheader,nounits"}

var nvidiaFields = [...]string{"index", "name", "memory.total", "uuid", "driver_version"}

// Messages nvidia-smi prints instead of a table.
const (
	nvidiaDriverFailure = "NVIDIA-SMI has failed"
	nvidiaNoDevices     = "No devices were found"
)

// ParseNvidiaSMI parses the standard output of
//
//	nvidia-smi --query-gpu=index,name,memory.total,uuid,driver_version --format=csv,noheader,nounits
//
// one GPU per line. Blank lines and a CR before each newline are ignored;
// anything else that is not five well-formed fields is a *ParseError naming
// the line and the field. An empty output, or nvidia-smi's "No devices were
// found", is an error wrapping ErrNoGPUs; its "NVIDIA-SMI has failed ..."
// message is one wrapping ErrToolFailed.
func ParseNvidiaSMI(out []byte) ([]GPU, error) {
	const tool = "nvidia-smi"
	var gpus []GPU
	lineOfIndex := map[int]int{}
	for i, line := range strings.Split(string(out), "\n") {
		lineNo := i + 1
		where := fmt.Sprintf("line %d", lineNo)
		line = strings.TrimSuffix(line, "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, nvidiaDriverFailure):
			return nil, &ParseError{Tool: tool, Where: where, Reason: "nvidia-smi reports its own failure: " + quoteUpTo(trimmed, 300), Err: ErrToolFailed}
		case strings.HasPrefix(trimmed, nvidiaNoDevices):
			return nil, &ParseError{Tool: tool, Where: where, Reason: "nvidia-smi found no devices", Err: ErrNoGPUs}
		}
		fields, err := splitCSVLine(line)
		if err != nil {
			return nil, &ParseError{Tool: tool, Where: where, Reason: fmt.Sprintf("not one CSV record: %v", err), Err: ErrMalformedOutput}
		}
		if len(fields) != len(nvidiaFields) {
			reason := fmt.Sprintf("has %d fields, want %d (%s)", len(fields), len(nvidiaFields), strings.Join(nvidiaFields[:], ", "))
			return nil, &ParseError{Tool: tool, Where: where, Reason: reason, Err: ErrMalformedOutput}
		}
		fieldErr := func(field int, reason string) error {
			return &ParseError{Tool: tool, Where: where, Field: nvidiaFields[field], Reason: reason, Err: ErrMalformedOutput}
		}
		g := GPU{Vendor: joinkeys.VendorNVIDIA}

		index := fields[0]
		switch n, ok := parseCount(index); {
		case unavailable(index):
			return nil, fieldErr(0, fmt.Sprintf("is not available (%q)", index))
		case index == "index":
			return nil, fieldErr(0, "the output has a header line; run nvidia-smi with --format=csv,noheader,nounits")
		case !ok:
			return nil, fieldErr(0, quote(index)+" is not a non-negative integer")
		default:
			g.Index = n
		}
		if first, seen := lineOfIndex[g.Index]; seen {
			return nil, fieldErr(0, fmt.Sprintf("index %d is repeated (first on line %d)", g.Index, first))
		}
		lineOfIndex[g.Index] = lineNo

		g.Name = fields[1]
		if why := checkText(g.Name); why != "" {
			return nil, fieldErr(1, why)
		}

		memory, err := parseNvidiaMiB(fields[2])
		if err != nil {
			return nil, fieldErr(2, err.Error())
		}
		g.MemoryMiB = memory

		g.UUID = fields[3]
		if why := checkText(g.UUID); why != "" {
			return nil, fieldErr(3, why)
		}
		if !strings.HasPrefix(g.UUID, "GPU-") || strings.ContainsAny(g.UUID, " \t") {
			return nil, fieldErr(3, quote(g.UUID)+` is not an NVIDIA GPU UUID ("GPU-...")`)
		}

		g.Driver = fields[4]
		if why := checkText(g.Driver); why != "" {
			return nil, fieldErr(4, why)
		}
		if strings.ContainsAny(g.Driver, " \t") {
			return nil, fieldErr(4, quote(g.Driver)+" is not a driver version")
		}
		gpus = append(gpus, g)
	}
	if len(gpus) == 0 {
		return nil, &ParseError{Tool: tool, Reason: "output lists no GPU", Err: ErrNoGPUs}
	}
	return gpus, nil
}

// splitCSVLine splits one line of nvidia-smi's CSV: fields separated by
// commas, with or without a space after each, quoted only if some future
// nvidia-smi quotes them. Each field is trimmed of surrounding spaces.
func splitCSVLine(line string) ([]string, error) {
	r := csv.NewReader(strings.NewReader(line))
	r.TrimLeadingSpace = true
	r.FieldsPerRecord = -1
	fields, err := r.Read()
	if err != nil {
		return nil, err
	}
	for i := range fields {
		fields[i] = strings.TrimSpace(fields[i])
	}
	return fields, nil
}

// parseNvidiaMiB parses memory.total: a positive number of MiB, bare (with
// nounits) or followed by " MiB" (without it).
func parseNvidiaMiB(v string) (int, error) {
	if unavailable(v) {
		return 0, fmt.Errorf("is not available (%q)", v)
	}
	number, unit, hasUnit := strings.Cut(v, " ")
	if hasUnit && strings.TrimSpace(unit) != "MiB" {
		return 0, fmt.Errorf("%s has unit %q, want MiB (or none, with nounits)", quote(v), strings.TrimSpace(unit))
	}
	n, ok := parseCount(number)
	if !ok {
		return 0, fmt.Errorf("%s is not a whole number of MiB", quote(v))
	}
	if n == 0 {
		return 0, fmt.Errorf("%s: a GPU with no memory", quote(v))
	}
	return n, nil
}
