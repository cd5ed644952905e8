package joinagent

import "golang.org/x/sys/unix"

// bindToDevice binds a socket to a network device (SO_BINDTODEVICE).
func bindToDevice(fd int, device string) error {
	return unix.SetsockoptString(fd, unix.SOL_SOCKET, unix.SO_BINDTODEVICE, device)
}
