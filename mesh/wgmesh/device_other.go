//go:build !linux

package wgmesh

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
)

// OpenDevice adopts the WireGuard device name; making one is Linux's
// alone here.
func OpenDevice(_ context.Context, name string, _ netip.Prefix, _ *slog.Logger) (*Device, error) {
	if _, err := net.InterfaceByName(name); err == nil {
		return &Device{Name: name, Kind: DeviceAdopted, close: func() error { return nil }}, nil
	}
	return nil, errors.New("wgmesh: making a WireGuard device is supported on Linux only; create " + name + " first")
}
