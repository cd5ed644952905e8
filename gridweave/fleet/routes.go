package fleet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// DeviceRoutes is Routes over netlink for one device: the kernel's main
// table, as `ip route replace PREFIX dev DEVICE` would write it (a link-
// scoped route), with no executable needed, so a static server binary
// works where no iproute2 is installed (its container image).
type DeviceRoutes struct{ Interface string }

// Replace implements Routes.
func (d DeviceRoutes) Replace(ctx context.Context, prefix netip.Prefix) error {
	route, err := d.route(prefix)
	if err != nil {
		return err
	}
	if err := netlink.RouteReplace(route); err != nil {
		return fmt.Errorf("route %s into %s: %w", prefix, d.Interface, err)
	}
	return nil
}

// Delete implements Routes; a route that is not there is fine.
func (d DeviceRoutes) Delete(ctx context.Context, prefix netip.Prefix) error {
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

func (d DeviceRoutes) route(prefix netip.Prefix) (*netlink.Route, error) {
	link, err := netlink.LinkByName(d.Interface)
	if err != nil {
		return nil, fmt.Errorf("the WireGuard device %s: %w", d.Interface, err)
	}
	prefix = prefix.Masked()
	dst := &net.IPNet{IP: prefix.Addr().AsSlice(), Mask: net.CIDRMask(prefix.Bits(), prefix.Addr().BitLen())}
	return &netlink.Route{LinkIndex: link.Attrs().Index, Dst: dst, Scope: netlink.SCOPE_LINK, Table: unix.RT_TABLE_MAIN}, nil
}
