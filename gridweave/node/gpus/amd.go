package gpus

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"gridweave.dev/joinkeys"
)

// amdSMIArgs are the arguments Detect passes to amd-smi.
var amdSMIArgs = []string{"static", "--json"}

// ParseAMDSMI parses the standard output of `amd-smi static --json`: a JSON
// list of one object per GPU, or (newer amd-smi) an object holding that
// list as "gpu_data". Per GPU it reads "gpu" (the index), the name from
// asic.market_name or else board.product_name, vram.size, driver.version
// and, if present, "uuid". A missing or unreadable index, name or size is a
// *ParseError naming the entry and the field; an empty list wraps ErrNoGPUs.
func ParseAMDSMI(out []byte) ([]GPU, error) {
	const tool = "amd-smi"
	malformed := func(where, field, reason string) error {
		return &ParseError{Tool: tool, Where: where, Field: field, Reason: reason, Err: ErrMalformedOutput}
	}
	out = bytes.TrimSpace(out)
	if len(out) == 0 {
		return nil, &ParseError{Tool: tool, Reason: "output is empty", Err: ErrNoGPUs}
	}
	var list []json.RawMessage
	switch out[0] {
	case '[':
		if err := json.Unmarshal(out, &list); err != nil {
			return nil, malformed("", "", "not a JSON list of GPUs: "+err.Error())
		}
	case '{':
		var wrapper map[string]json.RawMessage
		if err := json.Unmarshal(out, &wrapper); err != nil {
			return nil, malformed("", "", "not a JSON object: "+err.Error())
		}
		data, ok := wrapper["gpu_data"]
		if !ok {
			return nil, malformed("", "gpu_data", "the JSON object has no gpu_data list")
		}
		if err := json.Unmarshal(data, &list); err != nil {
			return nil, malformed("", "gpu_data", "is not a list: "+err.Error())
		}
	default:
		return nil, malformed("", "", fmt.Sprintf("does not start with JSON (first byte %q); was stderr mixed into it?", out[0]))
	}
	if len(list) == 0 {
		return nil, &ParseError{Tool: tool, Reason: "the GPU list is empty", Err: ErrNoGPUs}
	}

	gpus := make([]GPU, 0, len(list))
	entryOfIndex := map[int]int{}
	for i, raw := range list {
		where := fmt.Sprintf("entry %d", i)
		var entry map[string]json.RawMessage
		if err := json.Unmarshal(raw, &entry); err != nil || entry == nil {
			return nil, malformed(where, "", "is not a JSON object")
		}
		g := GPU{Vendor: joinkeys.VendorAMD}

		rawIndex, ok := entry["gpu"]
		if !ok {
			return nil, malformed(where, "gpu", "is missing")
		}
		index, ok := parseCount(string(rawIndex))
		if !ok {
			return nil, malformed(where, "gpu", quote(string(rawIndex))+" is not a non-negative integer")
		}
		if first, seen := entryOfIndex[index]; seen {
			return nil, malformed(where, "gpu", fmt.Sprintf("index %d is repeated (first in entry %d)", index, first))
		}
		entryOfIndex[index] = i
		g.Index = index
		where = fmt.Sprintf("entry %d (gpu %d)", i, index)

		asic, err := section(entry, "asic")
		if err != nil {
			return nil, malformed(where, "asic", err.Error())
		}
		board, err := section(entry, "board")
		if err != nil {
			return nil, malformed(where, "board", err.Error())
		}
		marketName, err := stringField(asic, "market_name")
		if err != nil {
			return nil, malformed(where, "asic.market_name", err.Error())
		}
		productName, err := stringField(board, "product_name")
		if err != nil {
			return nil, malformed(where, "board.product_name", err.Error())
		}
		switch {
		case usableName(marketName):
			g.Name = marketName
		case usableName(productName):
			g.Name = productName
		default:
			return nil, malformed(where, "asic.market_name", fmt.Sprintf("names no GPU (%q, and board.product_name is %q)", marketName, productName))
		}
		if why := checkText(g.Name); why != "" {
			return nil, malformed(where, "asic.market_name", why)
		}

		vram, err := section(entry, "vram")
		if err != nil {
			return nil, malformed(where, "vram", err.Error())
		}
		size, ok := vram["size"]
		if !ok {
			return nil, malformed(where, "vram.size", "is missing")
		}
		if g.MemoryMiB, err = parseAMDSize(size); err != nil {
			return nil, malformed(where, "vram.size", err.Error())
		}

		driver, err := section(entry, "driver")
		if err != nil {
			return nil, malformed(where, "driver", err.Error())
		}
		version, err := stringField(driver, "version")
		if err != nil {
			return nil, malformed(where, "driver.version", err.Error())
		}
		if !unavailable(version) {
			g.Driver = version
		}

		uuid, err := stringField(entry, "uuid")
		if err != nil {
			return nil, malformed(where, "uuid", err.Error())
		}
		if uuid != "" && !unavailable(uuid) {
			if why := checkText(uuid); why != "" {
				return nil, malformed(where, "uuid", why)
			}
			g.UUID = uuid
		}
		gpus = append(gpus, g)
	}
	return gpus, nil
}

// section returns the object under key, or nil if the key is missing, null
// or "N/A" (amd-smi's word for a section it could not read).
func section(entry map[string]json.RawMessage, key string) (map[string]json.RawMessage, error) {
	raw, ok := entry[key]
	if !ok || string(raw) == "null" {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil && unavailable(s) {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("is not an object: %s", quote(string(raw)))
	}
	return m, nil
}

// stringField returns the string under key, or "" if the section or key is
// missing or null.
func stringField(sec map[string]json.RawMessage, key string) (string, error) {
	raw, ok := sec[key]
	if !ok || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("is not a string: %s", quote(string(raw)))
	}
	return strings.TrimSpace(s), nil
}

// usableName reports whether an amd-smi name field names a product: not
// empty, not "N/A", and not only a PCI device id such as "0x74a1".
func usableName(v string) bool {
	if v == "" || unavailable(v) {
		return false
	}
	if hex, ok := strings.CutPrefix(strings.ToLower(v), "0x"); ok {
		if _, err := strconv.ParseUint(hex, 16, 64); err == nil {
			return false
		}
	}
	return true
}

// bytesPerUnit maps the units amd-smi may give vram.size in to bytes. Its
// "MB" are MiB: the library divides the byte count by 1024*1024.
var bytesPerUnit = map[string]int{
	"B":   1,
	"KB":  1 << 10,
	"KiB": 1 << 10,
	"MB":  1 << 20,
	"MiB": 1 << 20,
	"GB":  1 << 30,
	"GiB": 1 << 30,
}

// parseAMDSize parses vram.size: {"value": 65520, "unit": "MB"} (JSON
// output), "65520 MB" (as older amd-smi printed it), or a bare number of MB.
func parseAMDSize(raw json.RawMessage) (int, error) {
	value, unit := "", "MB"
	var sized struct {
		Value json.RawMessage `json:"value"`
		Unit  *string         `json:"unit"`
	}
	var text string
	switch {
	case json.Unmarshal(raw, &text) == nil:
		if unavailable(strings.TrimSpace(text)) {
			return 0, fmt.Errorf("is not available (%q)", text)
		}
		var hasUnit bool
		value, unit, hasUnit = strings.Cut(strings.TrimSpace(text), " ")
		if !hasUnit {
			return 0, fmt.Errorf("%s has no unit", quote(text))
		}
		unit = strings.TrimSpace(unit)
	case len(raw) > 0 && raw[0] == '{' && json.Unmarshal(raw, &sized) == nil:
		if sized.Value == nil {
			return 0, fmt.Errorf("has no value: %s", quote(string(raw)))
		}
		if sized.Unit == nil {
			return 0, fmt.Errorf("has no unit: %s", quote(string(raw)))
		}
		unit = *sized.Unit
		if json.Unmarshal(sized.Value, &text) == nil {
			if unavailable(text) {
				return 0, fmt.Errorf("is not available (%q)", text)
			}
			return 0, fmt.Errorf("value %s is a string, not a number", quote(text))
		}
		value = string(sized.Value)
	default:
		value = string(raw)
	}
	perUnit, ok := bytesPerUnit[unit]
	if !ok {
		return 0, fmt.Errorf("unit %s is not one of B, KB, MB, GB", quote(unit))
	}
	n, ok := parseCount(value)
	if !ok {
		return 0, fmt.Errorf("value %s is not a whole non-negative number", quote(value))
	}
	// n has at most 18 digits; keep n*perUnit in range.
	if n > (1<<62)/perUnit {
		return 0, fmt.Errorf("%d %s is more memory than any GPU has", n, unit)
	}
	mib := n * perUnit >> 20
	if mib <= 0 {
		return 0, fmt.Errorf("%d %s is less than 1 MiB", n, unit)
	}
	return mib, nil
}
