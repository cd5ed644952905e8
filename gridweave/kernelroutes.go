package gridweave

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
)

// KernelRoutes puts prefixes into the kernel's routing table through the
// master's WireGuard device: a node's pod CIDR must be routed into the
// device before WireGuard's allowed IPs can carry it to the node.
// Backends.KernelRoutes nil means no kernel routes (an in-memory mesh).
type KernelRoutes interface {
	// Replace routes prefix through the device (idempotent).
	Replace(ctx context.Context, prefix netip.Prefix) error
	// Delete removes the route; a route that is not there is fine.
	Delete(ctx context.Context, prefix netip.Prefix) error
}

// DeviceRoutes is KernelRoutes over iproute2 for one device.
type DeviceRoutes struct{ Interface string }

// Replace implements KernelRoutes.
func (d DeviceRoutes) Replace(ctx context.Context, prefix netip.Prefix) error {
	return ipRoute(ctx, "replace", prefix.String(), "dev", d.Interface)
}

// Delete implements KernelRoutes.
func (d DeviceRoutes) Delete(ctx context.Context, prefix netip.Prefix) error {
	err := ipRoute(ctx, "del", prefix.String(), "dev", d.Interface)
	if err != nil && strings.Contains(err.Error(), "No such process") {
		return nil
	}
	return err
}

func ipRoute(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "ip", append([]string{"route"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip route %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// routePodCIDR routes n's pod CIDR into the device, if there are kernel
// routes and n has one.
func (s *Server) routePodCIDR(ctx context.Context, pod netip.Prefix) error {
	if s.kernelRoutes == nil || !pod.IsValid() {
		return nil
	}
	return s.kernelRoutes.Replace(ctx, pod)
}

func (s *Server) unroutePodCIDR(ctx context.Context, pod netip.Prefix) error {
	if s.kernelRoutes == nil || !pod.IsValid() {
		return nil
	}
	return s.kernelRoutes.Delete(ctx, pod)
}
