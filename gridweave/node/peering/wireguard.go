package peering

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"gridweave.dev/mesh/wgkey"
)

// WireGuardDevice is a WireGuard device of this machine (kernel WireGuard
// or wireguard-go), through wgctrl.
type WireGuardDevice struct{ Interface string }

var _ Device = WireGuardDevice{}

// Read implements Device.
func (d WireGuardDevice) Read(context.Context) (DeviceState, error) {
	c, err := wgctrl.New()
	if err != nil {
		return DeviceState{}, err
	}
	defer c.Close()
	dev, err := c.Device(d.Interface)
	if err != nil {
		return DeviceState{}, fmt.Errorf("read %s: %w", d.Interface, err)
	}
	st := DeviceState{ListenPort: dev.ListenPort, Peers: make([]DevicePeer, len(dev.Peers))}
	for i, wp := range dev.Peers {
		p := DevicePeer{PublicKey: wgkey.Key(wp.PublicKey), Keepalive: wp.PersistentKeepaliveInterval,
			LastHandshake: wp.LastHandshakeTime, RxBytes: wp.ReceiveBytes, TxBytes: wp.TransmitBytes}
		if wp.Endpoint != nil {
			ap := wp.Endpoint.AddrPort()
			p.Endpoint = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
		}
		for _, ipn := range wp.AllowedIPs {
			if addr, ok := netip.AddrFromSlice(ipn.IP); ok {
				ones, _ := ipn.Mask.Size()
				p.AllowedIPs = append(p.AllowedIPs, netip.PrefixFrom(addr.Unmap(), ones))
			}
		}
		st.Peers[i] = p
	}
	return st, nil
}

// Apply implements Device: one ConfigureDevice with the changes in order.
func (d WireGuardDevice) Apply(_ context.Context, changes []PeerChange) error {
	if len(changes) == 0 {
		return nil
	}
	var peers []wgtypes.PeerConfig
	for _, ch := range changes {
		if ch.Remove {
			peers = append(peers, wgtypes.PeerConfig{PublicKey: wgtypes.Key(ch.PublicKey), Remove: true})
			continue
		}
		if ch.Handshake {
			off := time.Duration(0)
			peers = append(peers, wgtypes.PeerConfig{PublicKey: wgtypes.Key(ch.PublicKey), PersistentKeepaliveInterval: &off})
		}
		keepalive := ch.Keepalive
		pc := wgtypes.PeerConfig{PublicKey: wgtypes.Key(ch.PublicKey), ReplaceAllowedIPs: true, PersistentKeepaliveInterval: &keepalive,
			AllowedIPs: make([]net.IPNet, len(ch.AllowedIPs))}
		for i, p := range ch.AllowedIPs {
			pc.AllowedIPs[i] = net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
		}
		if ch.Endpoint.IsValid() {
			pc.Endpoint = net.UDPAddrFromAddrPort(ch.Endpoint)
		}
		peers = append(peers, pc)
	}
	c, err := wgctrl.New()
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.ConfigureDevice(d.Interface, wgtypes.Config{Peers: peers}); err != nil {
		return fmt.Errorf("configure %s: %w", d.Interface, err)
	}
	return nil
}
