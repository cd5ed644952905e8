package joinagent_test

import (
	"io"
	"net"
	"testing"
	"time"

	"gridweave.dev/internal/netnstest"
)

// echoServer answers TCP on addr inside ns with what it is sent, until the
// test ends.
func echoServer(t *testing.T, ns *netnstest.Namespace, addr string) {
	t.Helper()
	var ln net.Listener
	if err := ns.Do(func() (err error) { ln, err = net.Listen("tcp", addr); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
}

// echoFrom sends a line to addr from inside ns and reads it back.
func echoFrom(ns *netnstest.Namespace, addr string) error {
	return ns.Do(func() error {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Write([]byte("ping\n")); err != nil {
			return err
		}
		_, err = io.ReadFull(c, make([]byte, 5))
		return err
	})
}

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
