package netnstest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Namespace is a network namespace made for one test.
type Namespace struct {
	Name string
}

// RequireRoot fails the test unless it runs as root.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (network namespaces, /dev/net/tun); run make test as root")
	}
}

// UniqueName returns prefix followed by random hex, at most 15 bytes long
// (the kernel's limit for interface names).
func UniqueName(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := prefix + hex.EncodeToString(b)
	if len(name) > 15 {
		name = name[:15]
	}
	return name
}

// New creates a network namespace with its loopback up. At cleanup the
// processes still running in it (a daemonised wireguard-go, say) are
// killed and it is deleted.
func New(t testing.TB, prefix string) *Namespace {
	t.Helper()
	RequireRoot(t)
	ns := &Namespace{Name: UniqueName(prefix)}
	IP(t, "netns", "add", ns.Name)
	t.Cleanup(func() {
		ns.killProcesses()
		_ = exec.Command("ip", "netns", "del", ns.Name).Run()
	})
	ns.IP(t, "link", "set", "lo", "up")
	return ns
}

// IP runs `ip args...` in the test's own namespace and fails the test on error.
func IP(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// IP runs `ip args...` inside the namespace.
func (ns *Namespace) IP(t testing.TB, args ...string) {
	t.Helper()
	IP(t, append([]string{"-n", ns.Name}, args...)...)
}

// Route returns the routes for exactly prefix in ns's main table (nil: the
// test's own namespace), as `ip route show` prints them, or "" when there
// is none. An `ip` that fails or writes to stderr (a netlink dump cut short
// by another test changing links at the same moment, say) is asked again,
// then fails the test: "" always means no route, never no answer.
func Route(t testing.TB, ns *Namespace, prefix string) string {
	t.Helper()
	args := []string{"route", "show", prefix}
	if ns != nil {
		args = append([]string{"-n", ns.Name}, args...)
	}
	var failure string
	for range 5 {
		var stderr strings.Builder
		cmd := exec.Command("ip", args...)
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err == nil && stderr.Len() == 0 {
			return strings.TrimSpace(string(out))
		}
		failure = fmt.Sprintf("%v: %s", err, strings.TrimSpace(stderr.String()))
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("ip %s: %s", strings.Join(args, " "), failure)
	return ""
}

// Command returns a command that runs inside the namespace.
func (ns *Namespace) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", ns.Name, name}, args...)...)
}

// Link joins a and b with a veth pair, gives each end its address (CIDR
// notation, e.g. 198.18.100.1/30) and brings both up. It returns the names
// of the two ends.
func Link(t testing.TB, a *Namespace, addrA string, b *Namespace, addrB string) (string, string) {
	t.Helper()
	endA, endB := UniqueName("va"), UniqueName("vb")
	IP(t, "link", "add", endA, "netns", a.Name, "type", "veth", "peer", "name", endB, "netns", b.Name)
	a.IP(t, "addr", "add", addrA, "dev", endA)
	b.IP(t, "addr", "add", addrB, "dev", endB)
	a.IP(t, "link", "set", endA, "up")
	b.IP(t, "link", "set", endB, "up")
	return endA, endB
}

// LinkToHost joins ns to the test's own (host) namespace with a veth pair,
// gives each end its address and brings both up. The host's end goes when
// the test ends. It returns the names of the host's end and ns's end.
func LinkToHost(t testing.TB, hostAddr string, ns *Namespace, nsAddr string) (string, string) {
	t.Helper()
	endHost, endNS := UniqueName("vh"), UniqueName("vn")
	IP(t, "link", "add", endHost, "type", "veth", "peer", "name", endNS, "netns", ns.Name)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", endHost).Run() })
	IP(t, "addr", "add", hostAddr, "dev", endHost)
	ns.IP(t, "addr", "add", nsAddr, "dev", endNS)
	IP(t, "link", "set", endHost, "up")
	ns.IP(t, "link", "set", endNS, "up")
	return endHost, endNS
}

// killProcesses kills every other process inside the namespace and waits,
// briefly, until they are gone. The test's own process is spared: its main
// thread may have entered the namespace in Do (ip netns pids goes by it).
func (ns *Namespace) killProcesses() {
	for range 50 {
		out, _ := exec.Command("ip", "netns", "pids", ns.Name).Output()
		var others []int
		for _, field := range strings.Fields(string(out)) {
			var pid int
			if _, err := fmt.Sscanf(field, "%d", &pid); err == nil && pid > 1 && pid != os.Getpid() {
				others = append(others, pid)
			}
		}
		if len(others) == 0 {
			return
		}
		for _, pid := range others {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Do runs fn on an OS thread that has entered the namespace, so that
// sockets fn opens belong to it. A socket keeps its namespace after fn
// returns and may be used from any goroutine.
func (ns *Namespace) Do(fn func() error) error {
	return DoIn("/var/run/netns/"+ns.Name, fn)
}

// DoIn runs fn on a thread in the network namespace at path (a named
// namespace's file, or /proc/<pid>/ns/net: a pod's, say).
func DoIn(path string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		// The thread is never unlocked: it ends with this goroutine
		// instead of returning to the scheduler in another namespace.
		runtime.LockOSThread()
		target, err := os.Open(path)
		if err != nil {
			errc <- err
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("enter netns %s: %w", path, err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// EchoServer answers TCP on addr (inside ns; nil: the test's own
// namespace) with what it is sent, until the test ends.
func EchoServer(t testing.TB, ns *Namespace, addr string) {
	t.Helper()
	var ln net.Listener
	listen := func() (err error) { ln, err = net.Listen("tcp", addr); return err }
	var err error
	if ns == nil {
		err = listen()
	} else {
		err = ns.Do(listen)
	}
	if err != nil {
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

// Echo sends a line to addr from inside ns (nil: the test's own
// namespace) and reads it back.
func Echo(ns *Namespace, addr string) error {
	dial := func() error {
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
	}
	if ns == nil {
		return dial()
	}
	return ns.Do(dial)
}
