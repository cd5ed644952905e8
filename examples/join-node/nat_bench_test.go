package main

import (
	"fmt"
	"testing"
	"time"

	"gridweave.dev/gridweave/api"
)

// BenchmarkMeshThroughNATs joins a fleet of ten machines of mixed NAT
// types: six behind NATs that keep a port for every destination, three
// with no NAT, one behind a symmetric NAT (60/30/10). It reports:
//
//   - nat_link_up_s: from the second of two machines behind port-keeping
//     NATs registering (its join returned, its link service started) to
//     both reporting a direct link;
//
//   - relayed_pairs and relayed_share: the pairs some side reports
//     relayed once the links settle;
//
//   - relayed_without_symmetric: those of them with no machine behind
//     the symmetric NAT (the goal: none).
//
//     sudo go test -run '^$' -bench MeshThroughNATs -benchtime 1x ./examples/join-node/
func BenchmarkMeshThroughNATs(b *testing.B) {
	m := startMaster(b)
	command := m.joinCommand()
	type machine struct {
		n    *node
		kind string // port-keeping, open, symmetric
	}
	var fleet []machine
	join := func(n *node) {
		b.Helper()
		if code, stdout, stderr := n.run(command); code != 0 {
			b.Fatalf("%s: join exit %d: %s %s", n.hostname, code, stdout, stderr)
		}
	}
	// The first two behind port-keeping NATs: the time to their link.
	var nat [2]*node
	for i := range nat {
		nat[i], _ = m.newNodeBehindNAT(50+i, fmt.Sprintf("mixed-nat-%d", i), portPreserving)
		fleet = append(fleet, machine{nat[i], "port-keeping"})
	}
	enableForwarding(b, m.device)
	join(nat[0])
	nat[0].serve()
	join(nat[1])
	registered := time.Now()
	nat[1].serve()
	var linkUp time.Duration
	for {
		if linkStatesOf(m.links(nat[0].hostname))[nat[1].hostname] == api.LinkDirect &&
			linkStatesOf(m.links(nat[1].hostname))[nat[0].hostname] == api.LinkDirect {
			linkUp = time.Since(registered)
			break
		}
		if time.Since(registered) > time.Minute {
			b.Fatal("no direct link between two port-keeping NATs within a minute")
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The rest of the fleet.
	for i := 2; i < 6; i++ {
		n, _ := m.newNodeBehindNAT(50+i, fmt.Sprintf("mixed-nat-%d", i), portPreserving)
		fleet = append(fleet, machine{n, "port-keeping"})
	}
	sym, _ := m.newNodeBehindNAT(56, "mixed-symmetric", symmetric)
	fleet = append(fleet, machine{sym, "symmetric"})
	var open []*node
	for i := range 3 {
		n := m.newNode(57+i, fmt.Sprintf("mixed-open-%d", i), true)
		n.ns.IP(b, "route", "add", "198.18.243.0/24", "via", n.underlay.Prev().String())
		enableForwarding(b, n.hostLink)
		open = append(open, n)
		fleet = append(fleet, machine{n, "open"})
	}
	for _, n := range open {
		for _, o := range open {
			if n != o {
				n.ns.IP(b, "route", "add", o.underlay.String()+"/32", "via", n.underlay.Prev().String())
			}
		}
	}
	for _, f := range fleet[2:] {
		join(f.n)
		f.n.serve()
	}

	// Settled: nothing connecting, and past the handshake timeout.
	kind := map[string]string{}
	for _, f := range fleet {
		kind[f.n.hostname] = f.kind
	}
	settled := time.Now()
	var states map[string]map[string]api.LinkState
	for {
		states = map[string]map[string]api.LinkState{}
		connecting := 0
		for _, f := range fleet {
			states[f.n.hostname] = linkStatesOf(m.links(f.n.hostname))
			for _, s := range states[f.n.hostname] {
				if s != api.LinkDirect && s != api.LinkRelayed {
					connecting++
				}
			}
			if len(states[f.n.hostname]) != len(fleet)-1 {
				connecting++
			}
		}
		if connecting == 0 && time.Since(settled) > 20*time.Second {
			break
		}
		if time.Since(settled) > 2*time.Minute {
			b.Fatalf("the fleet's links do not settle: %v", states)
		}
		time.Sleep(500 * time.Millisecond)
	}
	b.ResetTimer()
	var relayed, withoutSymmetric, pairs int
	for range b.N {
		relayed, withoutSymmetric, pairs = 0, 0, 0
		for i, x := range fleet {
			for _, y := range fleet[i+1:] {
				pairs++
				if states[x.n.hostname][y.n.hostname] == api.LinkDirect && states[y.n.hostname][x.n.hostname] == api.LinkDirect {
					continue
				}
				relayed++
				if x.kind != "symmetric" && y.kind != "symmetric" {
					withoutSymmetric++
					b.Logf("relayed without a symmetric NAT: %s (%s) and %s (%s)", x.n.hostname, x.kind, y.n.hostname, y.kind)
				}
			}
		}
	}
	b.ReportMetric(linkUp.Seconds(), "nat_link_up_s")
	b.ReportMetric(float64(relayed), "relayed_pairs")
	b.ReportMetric(float64(relayed)/float64(pairs), "relayed_share")
	b.ReportMetric(float64(withoutSymmetric), "relayed_without_symmetric")
}
