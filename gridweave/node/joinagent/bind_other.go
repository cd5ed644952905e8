//go:build !linux

package joinagent

import "errors"

// bindToDevice is Linux's alone: elsewhere a call through the tunnel is
// refused rather than sent by another route.
func bindToDevice(int, string) error {
	return errors.New("joinagent: binding a call to the tunnel device needs Linux")
}
