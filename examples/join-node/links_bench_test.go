package main

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"gridweave.dev/gridweave/api"
	"gridweave.dev/internal/netnstest"
)

// BenchmarkDirectVersusHub measures TCP throughput between two joined
// machines' namespaces, over their VPN addresses, with the link service
// linking them directly and then with --hub-only (through the master:
// WireGuard twice, machine → master → machine). Every end is
// wireguard-go. The direct run also reports link_up_s: from the second
// machine's register (its join command returning, its link service
// started as systemd would start it) to the first machine's report of a
// direct link to it.
//
//	sudo go test -run '^$' -bench DirectVersusHub -benchtime 20x ./examples/join-node/
func BenchmarkDirectVersusHub(b *testing.B) {
	m := startMaster(b)
	command := m.joinCommand()
	first := m.newNode(45, "bench-a", false)
	second := m.newNode(46, "bench-b", false)
	enableForwarding(b, m.device, first.hostLink, second.hostLink)
	first.ns.IP(b, "route", "add", second.underlay.String()+"/32", "via", first.underlay.Prev().String())
	second.ns.IP(b, "route", "add", first.underlay.String()+"/32", "via", second.underlay.Prev().String())
	if code, stdout, stderr := first.run(command); code != 0 {
		b.Fatalf("join: %d %s %s", code, stdout, stderr)
	}
	firstService := first.serve()
	code, stdout, stderr := second.run(command)
	registered := time.Now()
	if code != 0 {
		b.Fatalf("join: %d %s %s", code, stdout, stderr)
	}
	secondService := second.serve()
	target, _ := joined(b, stdout)
	var linkUp time.Duration
	for {
		if states := linkStatesOf(m.links("bench-a")); states["bench-b"] == api.LinkDirect {
			linkUp = time.Since(registered)
			break
		}
		if time.Since(registered) > time.Minute {
			b.Fatal("no direct link within a minute")
		}
		time.Sleep(50 * time.Millisecond)
	}
	sink := netip.AddrPortFrom(target, 7779).String()
	tcpSink(b, second.ns, sink)

	b.Run("direct", func(b *testing.B) {
		measureThroughput(b, first.ns.Do, sink)
		b.ReportMetric(linkUp.Seconds(), "link_up_s") // after the timer's reset, which clears metrics
	})
	firstService.stop()
	secondService.stop()
	first.serve("--hub-only")
	second.serve("--hub-only")
	m.waitForLinks(linkStates{"bench-a": {"bench-b": api.LinkRelayed}, "bench-b": {"bench-a": api.LinkRelayed}}, 30*time.Second)
	if peers := first.device(); len(peers) != 1 {
		b.Fatalf("hub only, yet the device has %d peers", len(peers))
	}
	b.Run("hub", func(b *testing.B) { measureThroughput(b, first.ns.Do, sink) })
}

func linkStatesOf(l api.NodeLinks) map[string]api.LinkState {
	out := map[string]api.LinkState{}
	for _, link := range l.Links {
		out[link.Hostname] = link.State
	}
	return out
}

// tcpSink accepts connections at addr inside ns and discards what they
// send.
func tcpSink(tb testing.TB, ns *netnstest.Namespace, addr string) { tcpSinkIn(tb, ns.Do, addr) }

// tcpSinkIn is tcpSink in the namespace do runs its function in.
func tcpSinkIn(tb testing.TB, do func(func() error) error, addr string) {
	tb.Helper()
	var ln net.Listener
	if err := do(func() (err error) { ln, err = net.Listen("tcp", addr); return err }); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(io.Discard, c)
			}()
		}
	}()
}

// measureThroughput sends 32 MiB per op from inside the namespace do runs
// its function in (a machine's: ns.Do) to the sink at addr, over one
// connection.
func measureThroughput(b *testing.B, do func(func() error) error, addr string) {
	const perOp = 32 << 20
	var c net.Conn
	if err := do(func() (err error) { c, err = net.DialTimeout("tcp", addr, 10*time.Second); return err }); err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 1<<20)
	b.SetBytes(perOp)
	b.ResetTimer()
	for range b.N {
		for sent := 0; sent < perOp; sent += len(buf) {
			_ = c.SetWriteDeadline(time.Now().Add(30 * time.Second))
			if _, err := c.Write(buf); err != nil {
				b.Fatal(fmt.Errorf("send: %w", err))
			}
		}
	}
}
