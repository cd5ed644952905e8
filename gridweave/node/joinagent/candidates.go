package joinagent

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"gridweave.dev/gridweave/api"
	"gridweave.dev/gridweave/node/peering"
	"gridweave.dev/mesh/reflexive"
)

// maxEndpoints is how many endpoints a links report may name.
const maxEndpoints = 8

// natReprobeInterval is how often, on average, the NAT is probed again
// while the master's reflexive-address service stays where it was (a
// router replaced, a machine moved): between half of it and one and a
// half, at random.
const natReprobeInterval = 10 * time.Minute

// containerInterfaces are the name prefixes of the interfaces container
// runtimes and CNI plugins make: their addresses lead nowhere another
// machine can reach.
var containerInterfaces = []string{"docker", "cni", "cbr0", "flannel", "veth", "br-", "kube", "cali", "vxlan", "tunl", "lxc",
	"cilium", "weave", "antrea", "ovn-k8s", "genev_sys"}

// reportedEndpoints are the endpoints a links report names: the ones the
// node was told to advertise, then its own addresses at the device's
// port (host candidates: machines on one network reach each other there
// without the NAT between them and the master), none twice, at most
// maxEndpoints.
func reportedEndpoints(advertised []netip.AddrPort, own []netip.Addr, port int) []string {
	var out []string
	add := func(ep netip.AddrPort) {
		if s := ep.String(); len(out) < maxEndpoints && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	for _, ep := range advertised {
		add(ep)
	}
	if port <= 0 || port > 65535 {
		return out
	}
	for _, a := range own {
		add(netip.AddrPortFrom(a, uint16(port)))
	}
	return out
}

// ownAddresses are the global unicast IPv4 addresses of this machine's
// interfaces that are up, but for the WireGuard device, container
// interfaces and anything inside exclude (the VPN, the pod range),
// sorted, each once (two interfaces may hold one address).
func ownAddresses(device string, exclude []netip.Prefix) []netip.Addr {
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil
	}
	var out []netip.Addr
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 || ifc.Name == device ||
			slices.ContainsFunc(containerInterfaces, func(p string) bool { return strings.HasPrefix(ifc.Name, p) }) {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			addr, ok := netip.AddrFromSlice(ipn.IP)
			addr = addr.Unmap()
			if !ok || !addr.Is4() || !addr.IsGlobalUnicast() ||
				slices.ContainsFunc(exclude, func(p netip.Prefix) bool { return p.IsValid() && p.Contains(addr) }) {
				continue
			}
			out = append(out, addr)
		}
	}
	return sortedOnce(out)
}

// sortedOnce sorts addrs and drops repeats (two interfaces may hold one
// address).
func sortedOnce(addrs []netip.Addr) []netip.Addr {
	slices.SortFunc(addrs, netip.Addr.Compare)
	return slices.Compact(addrs)
}

// natProber probes the master's reflexive-address service (package
// reflexive) whenever the directory names it anew, and every
// natReprobeInterval, and keeps what it found.
type natProber struct {
	mu      sync.Mutex
	servers []netip.AddrPort
	found   api.NATMapping
	wake    chan struct{}
}

func newNATProber() *natProber { return &natProber{wake: make(chan struct{}, 1)} }

// setServers takes the directory's reflexive_endpoints; a change wakes
// the prober.
func (p *natProber) setServers(endpoints []string) {
	var servers []netip.AddrPort
	for _, e := range endpoints {
		if ep, err := netip.ParseAddrPort(e); err == nil && ep.Port() != 0 {
			servers = append(servers, ep)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if slices.Equal(servers, p.servers) {
		return
	}
	p.servers = servers
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// again wakes the prober in a few seconds (p.mu held).
func (p *natProber) again() {
	time.AfterFunc(5*time.Second+rand.N(5*time.Second), func() {
		select {
		case p.wake <- struct{}{}:
		default:
		}
	})
}

// nat is the last probe's finding; empty before the first.
func (p *natProber) nat() api.NATMapping {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.found
}

// run probes until ctx ends, telling links and signalling changed when
// the finding changes.
func (p *natProber) run(ctx context.Context, links *peering.Manager, changed chan<- struct{}, log *slog.Logger) {
	for {
		// Machines that started together do not probe together again.
		next := time.NewTimer(natReprobeInterval/2 + rand.N(natReprobeInterval))
		select {
		case <-ctx.Done():
			next.Stop()
			return
		case <-p.wake:
		case <-next.C:
		}
		next.Stop()
		p.mu.Lock()
		servers := p.servers
		p.mu.Unlock()
		if len(servers) == 0 {
			continue
		}
		res, err := reflexive.Probe(ctx, servers, reflexive.ProbeOptions{})
		if err != nil {
			if ctx.Err() == nil {
				log.WarnContext(ctx, "probing the NAT", "error", err)
			}
			continue
		}
		found := api.NATMapping(res.Mapping)
		p.mu.Lock()
		was := p.found
		if found == api.NATUnknown && was != "" {
			// Too few answers (the service busy, packets lost): what an
			// earlier probe found stands, and another comes sooner.
			found = was
			p.again()
		}
		p.found = found
		p.mu.Unlock()
		links.SetNAT(found)
		if found != was {
			log.InfoContext(ctx, "this machine's NAT", "mapping", found, "seen", res.Seen, "local_port", res.Local.Port())
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	}
}
