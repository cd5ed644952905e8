package kernelroutes_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"gridweave.dev/internal/netnstest"
	"gridweave.dev/mesh/kernelroutes"
)

// A prefix the main table routes elsewhere (a connected network, the
// default route, a route through another device) is never taken over;
// a prefix of its own is routed, idempotently, and deleted.
func TestReplaceNeverTakesAnotherDevicesRoute(t *testing.T) {
	if testing.Short() {
		t.Skip("needs root and network namespaces; run make test")
	}
	ns := netnstest.New(t, "gwkr")
	// "tun" stands for the WireGuard device, "lan" for the machine's own
	// network (a veth pair: this kernel has no dummy devices).
	ns.IP(t, "link", "add", "tun", "type", "veth", "peer", "name", "tunp")
	ns.IP(t, "link", "add", "lan", "type", "veth", "peer", "name", "lanp")
	for _, l := range []string{"tun", "tunp", "lan", "lanp"} {
		ns.IP(t, "link", "set", l, "up")
	}
	ns.IP(t, "address", "add", "198.18.5.1/24", "dev", "lan")
	ns.IP(t, "route", "add", "default", "via", "198.18.5.254", "dev", "lan")
	ns.IP(t, "route", "add", "198.18.6.0/24", "via", "198.18.5.254", "dev", "lan")
	// An overlay's route for another node's pods, as flannel's VXLAN
	// writes one: an on-link gateway on its own device.
	ns.IP(t, "link", "add", "overlay", "type", "veth", "peer", "name", "overlayp")
	ns.IP(t, "link", "set", "overlay", "up")
	ns.IP(t, "route", "add", "198.18.7.0/24", "via", "198.18.7.0", "dev", "overlay", "onlink")
	dev := kernelroutes.Device{Interface: "tun"}
	ctx := context.Background()

	for _, prefix := range []string{"198.18.5.0/24", "0.0.0.0/0", "198.18.6.0/24", "::/0"} {
		before := netnstest.Route(t, ns, prefix)
		err := ns.Do(func() error { return dev.Replace(ctx, netip.MustParsePrefix(prefix)) })
		if !errors.Is(err, kernelroutes.ErrRouteNotOwned) {
			t.Errorf("Replace(%s) = %v, want ErrRouteNotOwned", prefix, err)
		}
		if after := netnstest.Route(t, ns, prefix); after != before {
			t.Errorf("the route of %s changed: %q, then %q", prefix, before, after)
		}
	}
	// The overlay's route is taken over: the tunnel carries the prefix.
	if err := ns.Do(func() error { return dev.Replace(ctx, netip.MustParsePrefix("198.18.7.0/24")) }); err != nil {
		t.Errorf("Replace of an overlay's route: %v", err)
	}
	if r := netnstest.Route(t, ns, "198.18.7.0/24"); !strings.Contains(r, "dev tun") {
		t.Errorf("the overlay's route %q was not taken over", r)
	}
	own := "198.18.9.0/24"
	for range 2 {
		if err := ns.Do(func() error { return dev.Replace(ctx, netip.MustParsePrefix(own)) }); err != nil {
			t.Fatalf("Replace(%s): %v", own, err)
		}
	}
	if r := netnstest.Route(t, ns, own); !strings.Contains(r, "dev tun") {
		t.Fatalf("the route of %s is %q, want through tun", own, r)
	}
	if err := ns.Do(func() error { return dev.Delete(ctx, netip.MustParsePrefix(own)) }); err != nil {
		t.Fatal(err)
	}
	if r := netnstest.Route(t, ns, own); r != "" {
		t.Errorf("the route of %s after Delete: %q", own, r)
	}
	// Delete of a prefix routed elsewhere leaves that route alone.
	if err := ns.Do(func() error { return dev.Delete(ctx, netip.MustParsePrefix("198.18.6.0/24")) }); err != nil {
		t.Fatal(err)
	}
	if r := netnstest.Route(t, ns, "198.18.6.0/24"); !strings.Contains(r, "dev lan") {
		t.Errorf("Delete took another device's route: %q", r)
	}
}
