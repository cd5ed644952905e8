package wgmesh

// DeviceKind says where a Device came from.
type DeviceKind string

const (
	// DeviceAdopted: the device existed (wg-quick, systemd-networkd, an
	// earlier run of its owner) and is left as configured.
	DeviceAdopted DeviceKind = "adopted"
	// DeviceKernel: OpenDevice added a kernel WireGuard link.
	DeviceKernel DeviceKind = "kernel"
	// DeviceUserspace: OpenDevice runs wireguard-go in this process.
	DeviceUserspace DeviceKind = "userspace"
)

// Device is a WireGuard device OpenDevice adopted or made.
type Device struct {
	Name  string
	Kind  DeviceKind
	close func() error
	// userspace is the device this process runs (DeviceUserspace).
	userspace ipcSetter
}

// Close removes a device OpenDevice made; an adopted one stays.
func (d *Device) Close() error { return d.close() }
