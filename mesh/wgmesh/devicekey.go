package wgmesh

import (
	"context"
	"fmt"

	"golang.zx2c4.com/wireguard/wgctrl"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"gridweave.dev/mesh/wgkey"
)

// SetPrivateKey gives the device its key and listen port (a port of 0
// leaves the port as it is), if it does not have them already: a master
// keeps its key across restarts of itself and of the device, so nodes'
// configurations stay valid. Peers are left alone.
func SetPrivateKey(_ context.Context, device string, key wgkey.PrivateKey, listenPort int) error {
	c, err := wgctrl.New()
	if err != nil {
		return fmt.Errorf("wgmesh: open wgctrl: %w", err)
	}
	defer c.Close()
	d, err := c.Device(device)
	if err != nil {
		return fmt.Errorf("wgmesh: read device %s: %w", device, err)
	}
	want := wgtypes.Key(key)
	cfg := wgtypes.Config{}
	if d.PrivateKey != want {
		cfg.PrivateKey = &want
	}
	if listenPort != 0 && d.ListenPort != listenPort {
		cfg.ListenPort = &listenPort
	}
	if cfg.PrivateKey == nil && cfg.ListenPort == nil {
		return nil
	}
	if err := c.ConfigureDevice(device, cfg); err != nil {
		return fmt.Errorf("wgmesh: set the key of device %s: %w", device, err)
	}
	return nil
}
