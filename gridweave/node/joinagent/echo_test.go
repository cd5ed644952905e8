package joinagent_test

import (
	"testing"
	"time"

	"gridweave.dev/internal/netnstest"
)

func echoServer(t *testing.T, ns *netnstest.Namespace, addr string) {
	netnstest.EchoServer(t, ns, addr)
}

func echoFrom(ns *netnstest.Namespace, addr string) error { return netnstest.Echo(ns, addr) }

// eventually retries f a bounded number of times (the first packets wait
// for a WireGuard handshake) and returns its last error.
func eventually(f func() error) error {
	var err error
	for range 10 {
		if err = f(); err == nil {
			return nil
		}
		time.Sleep(300 * time.Millisecond)
	}
	return err
}
