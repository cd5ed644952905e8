package wgdevice

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"gridweave.dev/internal/netnstest"
	"gridweave.dev/mesh/wgkey"
)

const module = "golang.zx2c4.com/wireguard"

var build struct {
	once sync.Once
	path string
	err  error
}

// Binary returns the path of a wireguard-go built from the version of
// golang.zx2c4.com/wireguard in go.mod, cached in the user cache dir.
func Binary(t testing.TB) string {
	t.Helper()
	build.once.Do(func() { build.path, build.err = buildBinary() })
	if build.err != nil {
		t.Fatalf("build wireguard-go: %v", build.err)
	}
	return build.path
}

func buildBinary() (string, error) {
	version := "unknown"
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == module {
				version = dep.Version
			}
		}
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	path := filepath.Join(cache, "gridweave", "wireguard-go", version, "wireguard-go")
	if _, err := os.Stat(path); err == nil && version != "unknown" {
		return path, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	tmp := path + ".tmp" + randomSuffix()
	out, err := exec.Command("go", "build", "-o", tmp, module).CombinedOutput()
	if err != nil {
		return "", errors.New(err.Error() + ": " + string(out))
	}
	return path, os.Rename(tmp, path)
}

func randomSuffix() string { return netnstest.UniqueName("")[:8] }

// Device is a running wireguard-go device.
type Device struct {
	Name       string
	PrivateKey wgkey.PrivateKey
	PublicKey  wgkey.Key
	ListenPort int
	ns         *netnstest.Namespace
	proc       *process
}

// process is one run of wireguard-go for a Device.
type process struct {
	cmd     *exec.Cmd
	output  *bytes.Buffer
	exited  chan struct{}
	release chan struct{}
}

// Start runs a wireguard-go device named prefix+random inside ns (nil: the
// test's own namespace, e.g. for a server that must also reach loopback), gives it
// a fresh private key and listenPort (0 lets WireGuard choose), and stops it
// at cleanup. The interface is down and has no address; see Up.
func Start(t testing.TB, ns *netnstest.Namespace, prefix string, listenPort int) *Device {
	t.Helper()
	netnstest.RequireRoot(t)
	d := &Device{Name: netnstest.UniqueName(prefix), ns: ns}
	t.Cleanup(func() { d.stop() })
	d.launch(t)
	var err error
	if d.PrivateKey, d.PublicKey, err = wgkey.GeneratePair(); err != nil {
		t.Fatal(err)
	}
	d.configure(t, listenPort)
	return d
}

// Restart stops wireguard-go and starts a new one under the same name, as
// a service manager restarting it would: the new device gets the same
// private key and listen port back but has no peers, and its interface is
// down with no address (see Up).
func (d *Device) Restart(t testing.TB) {
	t.Helper()
	d.stop()
	d.launch(t)
	d.configure(t, d.ListenPort)
}

// launch starts wireguard-go and waits until its UAPI socket answers.
func (d *Device) launch(t testing.TB) {
	t.Helper()
	p := &process{output: &bytes.Buffer{}, exited: make(chan struct{}), release: make(chan struct{})}
	if d.ns == nil {
		p.cmd = exec.Command(Binary(t), "-f", d.Name)
	} else {
		p.cmd = d.ns.Command(Binary(t), "-f", d.Name)
	}
	p.cmd.Env = append(os.Environ(), "WG_PROCESS_FOREGROUND=1")
	p.cmd.Stdout, p.cmd.Stderr = p.output, p.output
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// PR_SET_PDEATHSIG fires when the forking *thread* exits. Fork from a
	// thread locked to a goroutine that lives until the process is stopped,
	// so that no other goroutine (netnstest.Do ends its locked threads) can
	// take the thread and end it early, and the device still dies with the
	// test binary.
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		started <- p.cmd.Start()
		<-p.release
	}()
	if err := <-started; err != nil {
		close(p.release)
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	d.proc = p

	// The socket file appears when it is bound, a moment before it
	// listens: wait until a UAPI request is answered.
	client, err := wgctrl.New()
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		_, err := os.Stat(d.Socket())
		if err == nil {
			if _, err = client.Device(d.Name); err == nil {
				return
			}
		}
		select {
		case <-p.exited:
			t.Fatalf("wireguard-go %s exited: %s", d.Name, p.output.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("wireguard-go %s: UAPI socket not answering after 10s (%v): %s", d.Name, err, p.output.String())
		}
	}
}

// configure sets the device's private key and, unless 0, its listen port,
// and records the port it listens on.
func (d *Device) configure(t testing.TB, listenPort int) {
	t.Helper()
	client, err := wgctrl.New()
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	priv := wgtypes.Key(d.PrivateKey)
	cfg := wgtypes.Config{PrivateKey: &priv}
	if listenPort != 0 {
		cfg.ListenPort = &listenPort
	}
	if err := client.ConfigureDevice(d.Name, cfg); err != nil {
		t.Fatalf("configure %s: %v", d.Name, err)
	}
	dev, err := client.Device(d.Name)
	if err != nil {
		t.Fatal(err)
	}
	d.ListenPort = dev.ListenPort
}

// stop ends the running wireguard-go, if any, and removes its socket.
func (d *Device) stop() {
	p := d.proc
	if p == nil {
		return
	}
	d.proc = nil
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	close(p.release)
	_ = os.Remove(d.Socket())
}

// Socket is the device's UAPI socket.
func (d *Device) Socket() string { return "/var/run/wireguard/" + d.Name + ".sock" }

// Up gives the device an address (CIDR notation) inside ns (nil: the
// test's own namespace) and brings it up.
func (d *Device) Up(t testing.TB, ns *netnstest.Namespace, addr string) {
	t.Helper()
	ip := netnstest.IP
	if ns != nil {
		ip = ns.IP
	}
	ip(t, "addr", "add", addr, "dev", d.Name)
	ip(t, "link", "set", d.Name, "up")
}
