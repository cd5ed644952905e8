package peering

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
)

// ConntrackFlows are the machine's flows as the kernel's connection
// tracking holds them (IPv4): both ends of each. A flow stays there a
// while after its last packet (30 s for a one-way UDP exchange, two
// minutes for a UDP stream, until it closes for TCP), which the links on
// demand take as still exchanging traffic.
//
// The kernel tracks connections in a network namespace once a firewall or
// NAT rule there needs it; a Kubernetes node's (kube-proxy's, the CNI's
// masquerade) does. A table that lists nothing at all is taken as not
// tracked (the link service's own connection to the master would be
// there): the Manager then links every node.
type ConntrackFlows struct{}

var _ Flows = ConntrackFlows{}

// Addresses implements Flows.
func (ConntrackFlows) Addresses(context.Context) ([]netip.Addr, error) {
	flows, err := netlink.ConntrackTableList(netlink.ConntrackTable, netlink.FAMILY_V4)
	if err != nil && !errors.Is(err, netlink.ErrDumpInterrupted) {
		// (An interrupted dump, routine on a busy table, still lists the
		// flows that were there throughout.)
		return nil, fmt.Errorf("read the connection tracking table: %w", err)
	}
	out := make([]netip.Addr, 0, 2*len(flows))
	add := func(ip net.IP) {
		if a, ok := netip.AddrFromSlice(ip); ok {
			out = append(out, a.Unmap())
		}
	}
	for _, f := range flows {
		// The reply direction names the real peer of a translated flow
		// (a Service's ClusterIP, a NodePort).
		add(f.Forward.SrcIP)
		add(f.Forward.DstIP)
		add(f.Reverse.SrcIP)
		add(f.Reverse.DstIP)
	}
	return out, nil
}
