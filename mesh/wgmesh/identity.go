package wgmesh

import (
	"net"
	"os"
	"path/filepath"
)

// socketDir is where wgctrl finds userspace devices' UAPI sockets.
const socketDir = "/var/run/wireguard"

// deviceIdentity tells one life of a device from the next, at the cost of
// a stat: a restarted wireguard-go binds a new UAPI socket (a new file),
// and a re-created kernel device gets a new interface index. The zero
// value means neither could be found (a device gone, or a Client that is
// not wgctrl's).
type deviceIdentity struct {
	socket  os.FileInfo
	ifindex int
}

func identify(device string) deviceIdentity {
	if fi, err := os.Stat(filepath.Join(socketDir, device+".sock")); err == nil {
		return deviceIdentity{socket: fi}
	}
	if ifi, err := net.InterfaceByName(device); err == nil {
		return deviceIdentity{ifindex: ifi.Index}
	}
	return deviceIdentity{}
}

// same reports whether a and b are the same life of a device.
func (a deviceIdentity) same(b deviceIdentity) bool {
	if (a.socket == nil) != (b.socket == nil) || a.ifindex != b.ifindex {
		return false
	}
	return a.socket == nil || os.SameFile(a.socket, b.socket) && a.socket.ModTime().Equal(b.socket.ModTime())
}
