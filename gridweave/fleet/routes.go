package fleet

import "gridweave.dev/mesh/kernelroutes"

// DeviceRoutes is Routes over netlink for one device: the kernel's main
// table, as `ip route replace PREFIX dev DEVICE` would write it (a link-
// scoped route), with no executable needed, so a static server binary
// works where no iproute2 is installed (its container image).
type DeviceRoutes = kernelroutes.Device
