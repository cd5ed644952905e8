package master

import (
	"context"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// listenTCP listens on addr; with freebind the address need not be on an
// interface yet (IP_FREEBIND), as the VPN address is not until the
// WireGuard device is up.
func listenTCP(ctx context.Context, addr string, freebind bool) (net.Listener, error) {
	lc := net.ListenConfig{}
	if freebind {
		lc.Control = func(_, _ string, c syscall.RawConn) error {
			var opErr error
			err := c.Control(func(fd uintptr) { opErr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_FREEBIND, 1) })
			if err != nil {
				return err
			}
			return opErr
		}
	}
	return lc.Listen(ctx, "tcp", addr)
}
