package wgmesh

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"

	"golang.zx2c4.com/wireguard/wgctrl"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// ipcSetter is the part of wireguard-go's *device.Device that sets its
// configuration from UAPI text.
type ipcSetter interface{ IpcSet(uapiConf string) error }

// Client returns a Client for d to give New (Options.Client): for a
// userspace device this process runs, one that writes the device's
// configuration to it directly rather than over its UAPI socket, which
// spares each write a connection, a lookup of the socket directory and a
// goroutine of the device's; it reads the device over the socket, as
// wgctrl does. For another device it returns nil: New's default.
func (d *Device) Client() Client {
	if d.userspace == nil {
		return nil
	}
	return &inProcessClient{name: d.Name, device: d.userspace}
}

// inProcessClient is a userspace device's Client.
type inProcessClient struct {
	name   string
	device ipcSetter

	mu     sync.Mutex
	reader *wgctrl.Client // opened at the first read
	closed bool
}

// ConfigureDevice implements Client.
func (c *inProcessClient) ConfigureDevice(name string, cfg wgtypes.Config) error {
	if name != c.name {
		return fmt.Errorf("wgmesh: this client configures %s, not %s", c.name, name)
	}
	text, err := uapiSet(cfg)
	if err != nil {
		return err
	}
	return c.device.IpcSet(text)
}

// Device implements Client, over the device's UAPI socket.
func (c *inProcessClient) Device(name string) (*wgtypes.Device, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, errors.New("wgmesh: the in-process client of " + c.name + " is closed")
	}
	if c.reader == nil {
		r, err := wgctrl.New()
		if err != nil {
			c.mu.Unlock()
			return nil, fmt.Errorf("wgmesh: open wgctrl: %w", err)
		}
		c.reader = r
	}
	r := c.reader
	c.mu.Unlock()
	return r.Device(name)
}

// Close implements Client.
func (c *inProcessClient) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.reader == nil {
		return nil
	}
	err := c.reader.Close()
	c.reader = nil
	return err
}

// uapiSet is cfg as the body of a UAPI "set" operation (WireGuard's
// cross-platform interface: one key=value a line, device keys first, then
// each peer from its public_key line).
func uapiSet(cfg wgtypes.Config) (string, error) {
	var b strings.Builder
	line := func(key, value string) { b.WriteString(key + "=" + value + "\n") }
	if cfg.PrivateKey != nil {
		line("private_key", hex.EncodeToString(cfg.PrivateKey[:]))
	}
	if cfg.ListenPort != nil {
		line("listen_port", strconv.Itoa(*cfg.ListenPort))
	}
	if cfg.FirewallMark != nil {
		line("fwmark", strconv.Itoa(*cfg.FirewallMark))
	}
	if cfg.ReplacePeers {
		line("replace_peers", "true")
	}
	for _, p := range cfg.Peers {
		line("public_key", hex.EncodeToString(p.PublicKey[:]))
		if p.Remove {
			line("remove", "true")
			continue
		}
		if p.UpdateOnly {
			line("update_only", "true")
		}
		if p.PresharedKey != nil {
			line("preshared_key", hex.EncodeToString(p.PresharedKey[:]))
		}
		if p.Endpoint != nil {
			line("endpoint", p.Endpoint.String())
		}
		if p.PersistentKeepaliveInterval != nil {
			seconds := p.PersistentKeepaliveInterval.Seconds()
			if seconds < 0 || seconds > 65535 || seconds != float64(int(seconds)) {
				return "", fmt.Errorf("wgmesh: peer %s: persistent keepalive %s is not a whole number of seconds from 0 to 65535",
					wgtypes.Key(p.PublicKey), p.PersistentKeepaliveInterval)
			}
			line("persistent_keepalive_interval", strconv.Itoa(int(seconds)))
		}
		if p.ReplaceAllowedIPs {
			line("replace_allowed_ips", "true")
		}
		for _, ipn := range p.AllowedIPs {
			if ipn.IP == nil || ipn.Mask == nil {
				return "", errors.New("wgmesh: peer " + wgtypes.Key(p.PublicKey).String() + ": an allowed IP without an address or a mask")
			}
			line("allowed_ip", (&net.IPNet{IP: ipn.IP, Mask: ipn.Mask}).String())
		}
	}
	return b.String(), nil
}
