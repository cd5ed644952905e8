package fleet

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
)

// DeviceRoutes is Routes over iproute2 for one device.
type DeviceRoutes struct{ Interface string }

// Replace implements Routes.
func (d DeviceRoutes) Replace(ctx context.Context, prefix netip.Prefix) error {
	return ipRoute(ctx, "replace", prefix.String(), "dev", d.Interface)
}

// Delete implements Routes.
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
