package kernelroutes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Device routes prefixes into one device: link-scoped routes in the
// kernel's main table.
type Device struct{ Interface string }

// ErrRouteNotOwned is returned by Replace when the main table already
// routes the prefix to the machine's own networks (a connected network, a
// route from DHCP or router advertisements, a route through a gateway):
// that route is never replaced.
var ErrRouteNotOwned = errors.New("the prefix is routed elsewhere, not through this device")

// Replace routes prefix through the device (idempotent). A default route
// (/0) is never written, and a route of the same prefix that is the
// machine's own (connected, from DHCP or router advertisements, or through
// a gateway) is left as it is and ErrRouteNotOwned returned. A route of
// a pod network's overlay (an on-link gateway on its own device, as
// flannel's VXLAN writes one per node) is replaced: the tunnel carries
// that prefix now.
func (d Device) Replace(ctx context.Context, prefix netip.Prefix) error {
	route, err := d.route(prefix)
	if err != nil {
		return err
	}
	if prefix.Bits() == 0 {
		return fmt.Errorf("route %s into %s: %w (a default route is never routed into the tunnel)", prefix, d.Interface, ErrRouteNotOwned)
	}
	family := unix.AF_INET
	if prefix.Addr().Is6() {
		family = unix.AF_INET6
	}
	existing, err := routesTo(family, route.Dst)
	if err != nil {
		return fmt.Errorf("read the routes of %s: %w", prefix, err)
	}
	for _, r := range existing {
		if r.LinkIndex == route.LinkIndex && r.Gw == nil {
			continue // ours
		}
		if machines(r) {
			via := "another device"
			if l, err := netlink.LinkByIndex(r.LinkIndex); err == nil {
				via = l.Attrs().Name
			}
			return fmt.Errorf("route %s into %s: %w (it goes through %s)", prefix, d.Interface, ErrRouteNotOwned, via)
		}
	}
	if err := netlink.RouteReplace(route); err != nil {
		return fmt.Errorf("route %s into %s: %w", prefix, d.Interface, err)
	}
	return nil
}

// routesTo is the main table's route to exactly dst that the kernel
// would use, if any. A FIB lookup (ip route get fibmatch) answers with
// one message, where listing the table costs a dump of every route (with
// 10,000 peers' pod CIDRs routed, a restart's replaces took 27 s that
// way); only when the lookup finds a route of another table (policy
// routing) is the main table listed.
func routesTo(family int, dst *net.IPNet) ([]netlink.Route, error) {
	found, err := netlink.RouteGetWithOptions(dst.IP, &netlink.RouteGetOptions{FIBMatch: true})
	if errors.Is(err, unix.ENETUNREACH) || errors.Is(err, unix.EHOSTUNREACH) {
		return nil, nil // no route at all
	}
	if err != nil {
		return nil, err
	}
	var exact []netlink.Route
	for _, r := range found {
		if r.Table != unix.RT_TABLE_MAIN {
			return netlink.RouteListFiltered(family, &netlink.Route{Dst: dst, Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_DST|netlink.RT_FILTER_TABLE)
		}
		if r.Dst != nil && r.Dst.String() == dst.String() {
			exact = append(exact, r)
		}
	}
	return exact, nil
}

// machines reports whether r is a route of the machine's own networks:
// connected (the kernel's), from DHCP or router advertisements, or
// through a gateway that is not on-link (an overlay's own device).
func machines(r netlink.Route) bool {
	switch r.Protocol {
	case unix.RTPROT_KERNEL, unix.RTPROT_DHCP, unix.RTPROT_RA:
		return true
	}
	return r.Gw != nil && r.Flags&unix.RTNH_F_ONLINK == 0
}

// Delete removes the route; a route that is not there is fine.
func (d Device) Delete(ctx context.Context, prefix netip.Prefix) error {
	route, err := d.route(prefix)
	if errors.As(err, new(netlink.LinkNotFoundError)) {
		return nil // the device went, and its routes with it
	}
	if err != nil {
		return err
	}
	if err := netlink.RouteDel(route); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("remove the route of %s from %s: %w", prefix, d.Interface, err)
	}
	return nil
}

func (d Device) route(prefix netip.Prefix) (*netlink.Route, error) {
	link, err := netlink.LinkByName(d.Interface)
	if err != nil {
		return nil, fmt.Errorf("the WireGuard device %s: %w", d.Interface, err)
	}
	prefix = prefix.Masked()
	dst := &net.IPNet{IP: prefix.Addr().AsSlice(), Mask: net.CIDRMask(prefix.Bits(), prefix.Addr().BitLen())}
	return &netlink.Route{LinkIndex: link.Attrs().Index, Dst: dst, Scope: netlink.SCOPE_LINK, Table: unix.RT_TABLE_MAIN}, nil
}
