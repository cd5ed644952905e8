//go:build !linux

package master

import (
	"context"
	"net"
)

// listenTCP listens on addr; freebind is Linux's alone, so elsewhere the
// address must already be on an interface.
func listenTCP(ctx context.Context, addr string, _ bool) (net.Listener, error) {
	var lc net.ListenConfig
	return lc.Listen(ctx, "tcp", addr)
}
