package wgmesh

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"

	"github.com/vishvananda/netlink"
	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/ipc"
	"golang.zx2c4.com/wireguard/tun"
)

// OpenDevice adopts the WireGuard device name when it exists, and makes
// it otherwise: a kernel WireGuard link over netlink where the kernel has
// WireGuard, else a userspace device (wireguard-go's device and tun
// packages) run inside this process, with its UAPI socket in
// /var/run/wireguard so that wgctrl, and so New, drive it like any other.
// A device it makes gets address and is brought up; an adopted one is
// left as its owner configured it. Close the Device when done: a made
// device goes with it (a userspace one cannot outlive the process).
func OpenDevice(ctx context.Context, name string, address netip.Prefix, log *slog.Logger) (*Device, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if _, err := net.InterfaceByName(name); err == nil {
		return &Device{Name: name, Kind: DeviceAdopted, close: func() error { return nil }}, nil
	}
	d, err := kernelDevice(name)
	if err != nil {
		log.InfoContext(ctx, "no kernel WireGuard; running the device in this process", "device", name, "kernel_error", err.Error())
		if d, err = userspaceDevice(name, log); err != nil {
			return nil, err
		}
	}
	if err := configure(name, address); err != nil {
		_ = d.Close()
		return nil, err
	}
	return d, nil
}

// kernelDevice adds a kernel WireGuard link.
func kernelDevice(name string) (*Device, error) {
	link := &netlink.Wireguard{LinkAttrs: netlink.LinkAttrs{Name: name}}
	if err := netlink.LinkAdd(link); err != nil {
		return nil, err
	}
	return &Device{Name: name, Kind: DeviceKernel, close: func() error {
		l, err := netlink.LinkByName(name)
		if err != nil {
			return nil // gone already
		}
		return netlink.LinkDel(l)
	}}, nil
}

// userspaceDevice runs wireguard-go's device on a new TUN device.
func userspaceDevice(name string, log *slog.Logger) (*Device, error) {
	tdev, err := tun.CreateTUN(name, device.DefaultMTU)
	if err != nil {
		return nil, fmt.Errorf("make the userspace WireGuard device %s (needs CAP_NET_ADMIN and /dev/net/tun): %w", name, err)
	}
	logger := &device.Logger{
		Verbosef: device.DiscardLogf,
		Errorf:   func(format string, args ...any) { log.Error("wireguard: " + fmt.Sprintf(format, args...)) },
	}
	dev := device.NewDevice(tdev, conn.NewDefaultBind(), logger)
	uapiFile, err := ipc.UAPIOpen(name)
	if err != nil {
		dev.Close()
		return nil, fmt.Errorf("the UAPI socket of %s: %w", name, err)
	}
	uapi, err := ipc.UAPIListen(name, uapiFile)
	if err != nil {
		uapiFile.Close()
		dev.Close()
		return nil, fmt.Errorf("the UAPI socket of %s: %w", name, err)
	}
	go func() {
		for {
			c, err := uapi.Accept()
			if err != nil {
				return
			}
			go dev.IpcHandle(c)
		}
	}()
	return &Device{Name: name, Kind: DeviceUserspace, userspace: dev, close: func() error {
		err := uapi.Close()
		// wireguard-go's listener closes its inotify descriptor before
		// waking the watcher of the socket, which may have closed its
		// wake-up pipe already: that write's "file already closed" is not
		// a failure (the listener is closed either way).
		if errors.Is(err, os.ErrClosed) {
			err = nil
		}
		dev.Close()
		if rmErr := os.Remove("/var/run/wireguard/" + name + ".sock"); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
			err = errors.Join(err, rmErr)
		}
		return err
	}}, nil
}

// configure gives a made device its address and brings it up.
func configure(name string, address netip.Prefix) error {
	link, err := netlink.LinkByName(name)
	if err != nil {
		return fmt.Errorf("the WireGuard device %s: %w", name, err)
	}
	if address.IsValid() {
		ipnet := &net.IPNet{IP: address.Addr().AsSlice(), Mask: net.CIDRMask(address.Bits(), address.Addr().BitLen())}
		if err := netlink.AddrReplace(link, &netlink.Addr{IPNet: ipnet}); err != nil {
			return fmt.Errorf("address %s on %s: %w", address, name, err)
		}
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("bring %s up: %w", name, err)
	}
	return nil
}
