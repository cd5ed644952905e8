package raytest

import (
	"context"
	"crypto/rand"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"gridweave.dev/internal/testcluster"
)

// Namespace is a network namespace for Ray nodes, linked to the host by a
// veth pair: Ray's GCS and raylet listen on every address of their
// namespace, so a node started here is reachable from the host (at NSIP)
// and from nowhere else.
type Namespace struct {
	Name   string
	HostIP string // the host's end of the link
	NSIP   string // the namespace's end, where its Ray nodes listen
}

// hostLinkRange is where Ray namespaces take their /30 links
// (198.19.160.0/19, in the benchmarking range tests use).
const hostLinkRange = "198.19.160.0"

// NewNamespace creates a namespace with loopback up and a /30 link to the
// host, on a subnet no interface of the host uses yet.
func NewNamespace() (_ *Namespace, err error) {
	// One process at a time picks a link subnet and makes it, so two test
	// packages never take the same one.
	unlock, err := testcluster.LockFile(context.Background(), filepath.Join(os.TempDir(), "gridweave-raytest-links.lock"))
	if err != nil {
		return nil, err
	}
	defer unlock()
	sweepStaleNamespaces()
	id := randomID()[:8]
	ns := &Namespace{Name: "rt-" + id}
	base := net.ParseIP(hostLinkRange).To4()
	for attempt := 0; ; attempt++ {
		k, err := rand.Int(rand.Reader, big.NewInt(2048)) // /30s in a /19
		if err != nil {
			return nil, err
		}
		off := int(k.Int64()) * 4
		host := net.IPv4(base[0], base[1], base[2]+byte(off/256), byte(off%256)+1).String()
		inNS := net.IPv4(base[0], base[1], base[2]+byte(off/256), byte(off%256)+2).String()
		used, err := addressInUse(host, inNS)
		if err != nil {
			return nil, err
		}
		if !used {
			ns.HostIP, ns.NSIP = host, inNS
			break
		}
		if attempt > 20 {
			return nil, fmt.Errorf("raytest: no free link subnet in %s/19", hostLinkRange)
		}
	}
	hostLink, nsLink := "rth-"+id, "rtn-"+id
	if out, err := exec.Command("ip", "netns", "add", ns.Name).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("raytest: ip netns add %s: %v: %s (Ray namespaces need root and iproute2)", ns.Name, err, out)
	}
	if err := os.WriteFile(ownerFile(ns.Name), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		ns.Close()
		return nil, err
	}
	steps := [][]string{
		{"-n", ns.Name, "link", "set", "lo", "up"},
		{"link", "add", hostLink, "type", "veth", "peer", "name", nsLink, "netns", ns.Name},
		{"addr", "add", ns.HostIP + "/30", "dev", hostLink},
		{"link", "set", hostLink, "up"},
		{"-n", ns.Name, "addr", "add", ns.NSIP + "/30", "dev", nsLink},
		{"-n", ns.Name, "link", "set", nsLink, "up"},
	}
	for _, args := range steps {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			ns.Close()
			return nil, fmt.Errorf("raytest: ip %s: %v: %s (Ray namespaces need root and iproute2)", strings.Join(args, " "), err, out)
		}
	}
	return ns, nil
}

func addressInUse(addrs ...string) (bool, error) {
	ifaces, err := net.InterfaceAddrs()
	if err != nil {
		return false, err
	}
	for _, a := range ifaces {
		ip, _, _ := net.ParseCIDR(a.String())
		for _, want := range addrs {
			if ip != nil && ip.String() == want {
				return true, nil
			}
		}
	}
	return false, nil
}

// Close kills whatever still runs in the namespace and deletes it (and
// with it the link).
func (ns *Namespace) Close() {
	if out, err := exec.Command("ip", "netns", "pids", ns.Name).Output(); err == nil {
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	_ = exec.Command("ip", "netns", "del", ns.Name).Run()
	_ = os.Remove(ownerFile(ns.Name))
}

// ownerFile records which process made a namespace, so a later run can
// remove the namespaces of a test process that died without Close.
func ownerFile(name string) string {
	return filepath.Join(os.TempDir(), "gridweave-raytest-"+name+".owner")
}

// sweepStaleNamespaces removes the namespaces (and what runs in them)
// whose owner process is gone.
func sweepStaleNamespaces() {
	owners, _ := filepath.Glob(filepath.Join(os.TempDir(), "gridweave-raytest-rt-*.owner"))
	for _, path := range owners {
		raw, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
		if err == nil && pid > 0 && syscall.Kill(pid, 0) == nil {
			continue // its owner still runs
		}
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(path), "gridweave-raytest-"), ".owner")
		(&Namespace{Name: name}).Close()
	}
}
