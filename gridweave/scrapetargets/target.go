package scrapetargets

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"
)

// DefaultPort is the port the DCGM exporter listens on unless told
// otherwise; a Target with Port 0 is scraped there.
const DefaultPort = 9400

// The label names written with every target (see the package documentation
// for what each means).
const (
	LabelNode     = "node"
	LabelHostname = "hostname"
	LabelGPUModel = "gpu_model"
	LabelGPUCount = "gpu_count"
)

var (
	// ErrInvalidHostname reports a hostname that is not a DNS-1123 label
	// and so cannot name a node's file.
	ErrInvalidHostname = errors.New("invalid hostname")
	// ErrInvalidTarget reports a Target that cannot be written: no VPN
	// address, a port out of range, no GPU model or no GPUs.
	ErrInvalidTarget = errors.New("invalid scrape target")
	// ErrMalformedFile reports a <hostname>.json file in the directory
	// that does not hold the target group this package writes.
	ErrMalformedFile = errors.New("malformed scrape target file")
)

// Target is one GPU node's DCGM exporter, as Prometheus should scrape it.
type Target struct {
	// Hostname is the node's name in the cluster (a DNS-1123 label); it
	// names the file and fills the "node" and "hostname" labels.
	Hostname string
	// VPNIP is the node's address on the WireGuard mesh.
	VPNIP netip.Addr
	// Port is the DCGM exporter's port; 0 means DefaultPort.
	Port int
	// GPUModel is the GPU model as the driver names it.
	GPUModel string
	// GPUCount is the number of GPUs on the node, at least 1.
	GPUCount int
}

// Address returns the target as Prometheus scrapes it: the VPN address and
// the port (DefaultPort when Port is 0), e.g. "198.18.0.7:9400".
func (t Target) Address() string {
	port := t.Port
	if port == 0 {
		port = DefaultPort
	}
	return netip.AddrPortFrom(t.VPNIP, uint16(port)).String()
}

// Validate reports why t cannot be written, or nil if it can.
func (t Target) Validate() error {
	if err := ValidateHostname(t.Hostname); err != nil {
		return err
	}
	switch {
	case !t.VPNIP.IsValid():
		return fmt.Errorf("%w: node %q has no VPN IP", ErrInvalidTarget, t.Hostname)
	case t.VPNIP.IsUnspecified():
		return fmt.Errorf("%w: node %q: VPN IP %s is the unspecified address", ErrInvalidTarget, t.Hostname, t.VPNIP)
	case t.VPNIP.Zone() != "":
		return fmt.Errorf("%w: node %q: VPN IP %s has a zone; a mesh address has none", ErrInvalidTarget, t.Hostname, t.VPNIP)
	case t.Port < 0 || t.Port > 65535:
		return fmt.Errorf("%w: node %q: port %d is out of range (1-65535, or 0 for %d)", ErrInvalidTarget, t.Hostname, t.Port, DefaultPort)
	case t.GPUModel == "":
		return fmt.Errorf("%w: node %q has no GPU model", ErrInvalidTarget, t.Hostname)
	case !utf8.ValidString(t.GPUModel):
		return fmt.Errorf("%w: node %q: GPU model %q is not valid UTF-8", ErrInvalidTarget, t.Hostname, t.GPUModel)
	case t.GPUCount < 1:
		return fmt.Errorf("%w: node %q has GPU count %d; a DCGM target needs at least one GPU", ErrInvalidTarget, t.Hostname, t.GPUCount)
	}
	return nil
}

// ValidateHostname accepts a DNS-1123 label, as Kubernetes does for node
// names: 1-63 lowercase letters, digits and '-', starting and ending with a
// letter or digit. Such a name has no path separator and is never "." or
// "..", so it can only name a file inside the directory.
func ValidateHostname(h string) error {
	if h == "" {
		return fmt.Errorf("%w: the hostname is empty", ErrInvalidHostname)
	}
	if strings.ContainsAny(h, `/\`) {
		return fmt.Errorf("%w: %q contains a path separator", ErrInvalidHostname, h)
	}
	if len(h) > 63 {
		return fmt.Errorf("%w: %q is %d characters; a DNS-1123 label has at most 63", ErrInvalidHostname, h, len(h))
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		alnum := (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')
		if !alnum && (c != '-' || i == 0 || i == len(h)-1) {
			return fmt.Errorf("%w: %q is not a DNS-1123 label: use lowercase letters, digits and '-', starting and ending with a letter or digit", ErrInvalidHostname, h)
		}
	}
	return nil
}

// targetGroup is one entry of a Prometheus file_sd file.
type targetGroup struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels"`
}

// encode renders t as the content of its file_sd file. The output is
// deterministic (encoding/json sorts map keys), so equal targets give equal
// bytes.
func encode(t Target) ([]byte, error) {
	groups := []targetGroup{{
		Targets: []string{t.Address()},
		Labels: map[string]string{
			LabelNode:     t.Hostname,
			LabelHostname: t.Hostname,
			LabelGPUModel: t.GPUModel,
			LabelGPUCount: strconv.Itoa(t.GPUCount),
		},
	}}
	b, err := json.MarshalIndent(groups, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding the scrape target of node %q: %w", t.Hostname, err)
	}
	return append(b, '\n'), nil
}

// decode parses a file this package wrote for hostname. It refuses anything
// else, so List never reports a target it would not write.
func decode(hostname string, content []byte) (Target, error) {
	malformed := func(format string, args ...any) (Target, error) {
		return Target{}, fmt.Errorf("%w: %s.json: %s", ErrMalformedFile, hostname, fmt.Sprintf(format, args...))
	}
	var groups []targetGroup
	dec := json.NewDecoder(bytes.NewReader(content))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&groups); err != nil {
		return malformed("%v", err)
	}
	if dec.More() {
		return malformed("trailing data after the target list")
	}
	if len(groups) != 1 {
		return malformed("%d target groups, want 1", len(groups))
	}
	g := groups[0]
	if len(g.Targets) != 1 {
		return malformed("%d targets, want 1", len(g.Targets))
	}
	addr, err := netip.ParseAddrPort(g.Targets[0])
	if err != nil {
		return malformed("target %q: %v", g.Targets[0], err)
	}
	for _, name := range []string{LabelNode, LabelHostname, LabelGPUModel, LabelGPUCount} {
		if _, ok := g.Labels[name]; !ok {
			return malformed("no %q label", name)
		}
	}
	if g.Labels[LabelHostname] != hostname {
		return malformed("label %s=%q does not match the file name", LabelHostname, g.Labels[LabelHostname])
	}
	count, err := strconv.Atoi(g.Labels[LabelGPUCount])
	if err != nil {
		return malformed("label %s=%q is not a number", LabelGPUCount, g.Labels[LabelGPUCount])
	}
	t := Target{
		Hostname: hostname,
		VPNIP:    addr.Addr(),
		Port:     int(addr.Port()),
		GPUModel: g.Labels[LabelGPUModel],
		GPUCount: count,
	}
	if err := t.Validate(); err != nil {
		return malformed("%v", err)
	}
	return t, nil
}
