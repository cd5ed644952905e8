// Package gpus detects the GPUs of the machine it runs on, for the
// node-side join agent: what it finds goes into the registration as
// api.GPU values (index, vendor, name, memory_mib, uuid).
//
// Detection asks the vendor tools, never the kernel directly:
//
//	nvidia-smi --query-gpu=index,name,memory.total,uuid,driver_version --format=csv,noheader,nounits
//	amd-smi static --json
//
// Detect runs them through Options.LookPath and Options.Run, so tests and
// callers can replace both. The rules: if nvidia-smi is installed, its
// answer is the answer, and any failure is an error (a driver that is not
// loaded, a GPU the tool cannot read) rather than a silent CPU-only join;
// otherwise, if amd-smi is installed, the same holds for it; with neither,
// the machine is CPU-only and Detect returns no GPUs and no error. A tool
// that is installed but lists no GPU is an error wrapping ErrNoGPUs, so a
// caller that wants to join such a machine CPU-only has to say so.
//
// The parsers, ParseNvidiaSMI and ParseAMDSMI, are pure functions of the
// tool's standard output. They are strict: a wrong field count, a value the
// tool could not read ("N/A", "[N/A]", "[Not Supported]", any "[...]"), a
// malformed number, a repeated index or an empty list is a *ParseError
// naming the line or entry and the field. Each GPU they return has its
// vendor set, a non-negative index distinct from the others', a name, and a
// positive memory size.
//
// GPU is what a tool saw, driver version included, which the agent wants
// for its own checks and logs; the register request's api.GPU has no room
// for it. GPU.Report and Reports convert to the wire type, and GPU.Vendor
// uses the ledger's constants, joinkeys.VendorNVIDIA and
// joinkeys.VendorAMD, which the server checks against.
//
// Known shapes of the tools' output, each covered by a fixture in
// testdata/:
//
//   - nvidia-smi prints one line per physical GPU, fields separated by ", ",
//     without quoting; lines may end in CRLF (Windows). With MIG enabled the
//     query still lists the physical GPUs (MIG instances are not rows), and
//     memory.total is the whole GPU's. If the unit was not suppressed,
//     memory.total reads "81559 MiB"; the parser accepts that unit and no
//     other.
//   - nvidia-smi exits non-zero with "NVIDIA-SMI has failed because it
//     couldn't communicate with the NVIDIA driver" when the driver is not
//     loaded, and with "No devices were found" when it sees no GPU.
//   - amd-smi up to ROCm 6.3 prints a JSON list with one object per GPU;
//     later releases wrap that list as {"gpu_data": [...]}. Both are
//     accepted. The name is asic.market_name, or board.product_name when
//     the market name is missing or only a PCI id; memory is vram.size,
//     {"value": N, "unit": "MB"}, where amd-smi's MB are MiB (the library
//     divides bytes by 1024*1024). amd-smi static reports no UUID, so AMD
//     GPUs have an empty UUID unless the output carries a "uuid" key.
package gpus
