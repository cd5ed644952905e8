package joinagent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"gridweave.dev/mesh/wgkey"
)

// TunnelConfig is the node's side of the WireGuard tunnel to the master.
type TunnelConfig struct {
	PrivateKey      wgkey.PrivateKey
	Address         netip.Prefix // the node's VPN address with the VPN CIDR's length
	MasterPublicKey wgkey.Key
	MasterEndpoint  netip.AddrPort // invalid: the master reaches out first
	AllowedIPs      []netip.Prefix // routed to the master: the VPN CIDR
	Keepalive       time.Duration
}

// Tunnel brings the node's tunnel up (idempotently) and down.
type Tunnel interface {
	Up(ctx context.Context, cfg TunnelConfig) error
	Down(ctx context.Context) error
}

// WireGuardTunnel is a WireGuard device on this machine: created as a
// kernel device when the kernel has WireGuard, else by running
// wireguard-go; configured through wgctrl; addressed and brought up with
// iproute2 (`ip`).
type WireGuardTunnel struct {
	Interface string
	// Userspace is the wireguard-go command; default "wireguard-go".
	Userspace string
}

func (t *WireGuardTunnel) userspace() string {
	if t.Userspace != "" {
		return t.Userspace
	}
	return "wireguard-go"
}

// Up implements Tunnel. A device that is already up keeps its session with
// the master: the master's peer is updated in place (the same private key
// and peer leave the handshake alone; wgctrl's ReplacePeers would drop it
// and the next packets would wait for a new one), and only peers that are
// not the master's are removed.
func (t *WireGuardTunnel) Up(ctx context.Context, cfg TunnelConfig) error {
	if _, err := net.InterfaceByName(t.Interface); err != nil {
		if err := run(ctx, "ip", "link", "add", t.Interface, "type", "wireguard"); err != nil {
			if err := run(ctx, t.userspace(), t.Interface); err != nil {
				return fmt.Errorf("no kernel WireGuard and %s failed: %w", t.userspace(), err)
			}
			if err := waitForDevice(ctx, t.Interface); err != nil {
				return err
			}
		}
	}
	c, err := wgctrl.New()
	if err != nil {
		return err
	}
	defer c.Close()
	key := wgtypes.Key(cfg.PrivateKey)
	peer := wgtypes.PeerConfig{
		PublicKey:                   wgtypes.Key(cfg.MasterPublicKey),
		ReplaceAllowedIPs:           true,
		PersistentKeepaliveInterval: &cfg.Keepalive,
	}
	for _, p := range cfg.AllowedIPs {
		peer.AllowedIPs = append(peer.AllowedIPs, net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())})
	}
	if cfg.MasterEndpoint.IsValid() {
		peer.Endpoint = net.UDPAddrFromAddrPort(cfg.MasterEndpoint)
	}
	peers := []wgtypes.PeerConfig{peer}
	current, err := c.Device(t.Interface)
	if err != nil {
		return fmt.Errorf("read %s: %w", t.Interface, err)
	}
	for _, p := range current.Peers {
		if p.PublicKey != peer.PublicKey {
			peers = append(peers, wgtypes.PeerConfig{PublicKey: p.PublicKey, Remove: true})
		}
	}
	if err := c.ConfigureDevice(t.Interface, wgtypes.Config{PrivateKey: &key, Peers: peers}); err != nil {
		return fmt.Errorf("configure %s: %w", t.Interface, err)
	}
	// An address of an earlier join (the master released the machine
	// and gave it another) goes first: the kernel would send from it, the
	// master's peer allows the new one alone, and deleting a primary
	// address later would take the new one with it.
	if iface, err := net.InterfaceByName(t.Interface); err == nil {
		addrs, _ := iface.Addrs()
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip, _ := netip.AddrFromSlice(ipn.IP)
			ones, _ := ipn.Mask.Size()
			if old := netip.PrefixFrom(ip.Unmap(), ones); ip.Unmap().Is4() && old != cfg.Address {
				if err := run(ctx, "ip", "address", "del", old.String(), "dev", t.Interface); err != nil {
					return err
				}
			}
		}
	}
	if err := run(ctx, "ip", "address", "replace", cfg.Address.String(), "dev", t.Interface); err != nil {
		return err
	}
	return run(ctx, "ip", "link", "set", t.Interface, "up")
}

// Down implements Tunnel: the device goes (with its key, its addresses and
// its routes). A device that is not there is fine.
func (t *WireGuardTunnel) Down(ctx context.Context) error {
	if _, err := net.InterfaceByName(t.Interface); err != nil {
		return nil
	}
	if err := run(ctx, "ip", "link", "delete", t.Interface); err != nil {
		return err
	}
	_ = os.Remove("/var/run/wireguard/" + t.Interface + ".sock") // wireguard-go's socket, if it left one
	return nil
}

func run(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func waitForDevice(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		if _, err := net.InterfaceByName(name); err == nil {
			if _, err := os.Stat("/var/run/wireguard/" + name + ".sock"); err == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return errors.New("wireguard-go started but device " + name + " did not appear")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Device names the WireGuard device: calls to the master's VPN address
// are bound to it (SO_BINDTODEVICE), so they travel through the tunnel
// or not at all.
func (t *WireGuardTunnel) Device() string { return t.Interface }
