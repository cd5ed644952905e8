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

// Replace routes prefix through the device (idempotent).
func (d Device) Replace(ctx context.Context, prefix netip.Prefix) error {
	route, err := d.route(prefix)
	if err != nil {
		return err
	}
	if err := netlink.RouteReplace(route); err != nil {
		return fmt.Errorf("route %s into %s: %w", prefix, d.Interface, err)
	}
	return nil
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
