package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"gridweave.dev/internal/realnode"
)

// Run as root, the playground's master gets what a real one has: an
// underlay address that machines reach (on a veth of its own: this is
// one host) and a WireGuard device the server makes; and `playground
// machine` runs the join command it printed on a machine of its own: a
// network namespace linked to the host by a veth pair, with its own
// hostname, /var/lib/gridweave and /usr/local/bin (mount and UTS
// namespaces), and wireguard-go there, since no kernel here need have
// WireGuard. The master is in the kubelet join mode and a machine is a
// real node's (internal/realnode: its own /run, kubelet and CNI
// directories, cgroups and sysctl shadows), where the join agent runs
// containerd and the kubelet. Every address is in 198.18.0.0/15.
const (
	underlayDevice  = "gwpg0"
	masterUnderlay  = "198.18.250.1"
	playgroundVPN   = "198.19.250.0/24"
	playgroundVPNIP = "198.19.250.1"
	wireguardDevice = "gwpg-wg"
	wireguardPort   = 51899
	// machinesDir keeps the join command and each machine's files.
	machinesDir = "/var/lib/gridweave-playground"
	netnsPrefix = "gwpg-m"
)

// ipCommand runs ip with args.
func ipCommand(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// masterUnderlayUp gives the master its underlay address; the returned
// function takes it and every machine away, and the mountpoints the
// machines made on the host unless keepMountpoints.
func masterUnderlayUp(keepMountpoints bool) (func(), error) {
	removeMachines()
	_ = ipCommand("link", "del", underlayDevice)
	for _, args := range [][]string{
		{"link", "add", underlayDevice, "type", "veth", "peer", "name", underlayDevice + "p"},
		{"address", "add", masterUnderlay + "/32", "dev", underlayDevice},
		{"link", "set", underlayDevice, "up"},
	} {
		if err := ipCommand(args...); err != nil {
			_ = ipCommand("link", "del", underlayDevice)
			return nil, err
		}
	}
	// What a playground killed before its cleanup left: machines of an
	// older ledger.
	if err := os.RemoveAll(machinesDir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(machinesDir, 0o700); err != nil {
		return nil, err
	}
	return func() {
		removeMachines()
		_ = ipCommand("link", "del", underlayDevice)
		_ = os.RemoveAll(machinesDir)
		if !keepMountpoints {
			_, _ = realnode.RemoveMountpoints()
		}
	}, nil
}

// removeMachines stops every machine's processes and removes its
// namespace and link.
func removeMachines() {
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		if !strings.HasPrefix(name, netnsPrefix) {
			continue
		}
		pids, _ := exec.Command("ip", "netns", "pids", name).Output()
		for _, pid := range strings.Fields(string(pids)) {
			if p, err := strconv.Atoi(pid); err == nil {
				if proc, err := os.FindProcess(p); err == nil {
					_ = proc.Kill()
				}
			}
		}
		n, _ := strconv.Atoi(strings.TrimPrefix(name, netnsPrefix))
		// A real node's machine: its containerd, kubelet and pods, in
		// its cgroups (none in the k3s join mode).
		if err := realnode.Remove(machineName(n)); err != nil {
			fmt.Fprintf(os.Stderr, "playground: removing machine %d: %v\n", n, err)
		}
		_ = ipCommand("netns", "del", name)
		_ = ipCommand("link", "del", "gwpgv"+strings.TrimPrefix(name, netnsPrefix))
	}
}

// machine runs the playground's join command on a new machine and
// reports what the agent said.
func machine(ctx context.Context, stdout, stderr io.Writer) error {
	if os.Geteuid() != 0 {
		return errors.New("a machine is a network namespace: run as root (sudo make playground-machine)")
	}
	raw, err := os.ReadFile(filepath.Join(machinesDir, "join-command"))
	if err != nil {
		return fmt.Errorf("no playground with machines is running (start it as root: sudo make playground): %w", err)
	}
	command := strings.TrimSpace(string(raw))
	n := 1
	for ; n < 60; n++ {
		if _, err := os.Stat("/var/run/netns/" + netnsPrefix + strconv.Itoa(n)); err != nil {
			break
		}
	}
	ns, link := netnsPrefix+strconv.Itoa(n), "gwpgv"+strconv.Itoa(n)
	hostEnd := netip.AddrFrom4([4]byte{198, 18, 251, byte(4*n + 1)})
	nsEnd := hostEnd.Next()
	for _, args := range [][]string{
		{"netns", "add", ns},
		{"link", "add", link, "type", "veth", "peer", "name", link + "p"},
		{"link", "set", link + "p", "netns", ns},
		{"address", "add", hostEnd.String() + "/30", "dev", link},
		{"link", "set", link, "up"},
		{"-n", ns, "address", "add", nsEnd.String() + "/30", "dev", link + "p"},
		{"-n", ns, "link", "set", link + "p", "up"},
		{"-n", ns, "link", "set", "lo", "up"},
		{"-n", ns, "route", "add", masterUnderlay + "/32", "via", hostEnd.String()},
	} {
		if err := ipCommand(args...); err != nil {
			return err
		}
	}
	home := filepath.Join(machinesDir, "machine-"+strconv.Itoa(n))
	for _, d := range []string{"state", "bin", "work", "tmp"} {
		if err := os.MkdirAll(filepath.Join(home, d), 0o700); err != nil {
			return err
		}
	}
	// The mountpoints of the machine's own directories, made where the
	// host has none (removed when the playground stops).
	for _, mountpoint := range []string{"/var/lib/gridweave", "/usr/local/bin"} {
		if err := realnode.MakeMountpoint(mountpoint); err != nil {
			return err
		}
	}
	// wireguard-go at the version go.mod pins, for the machine's tunnel.
	build := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(home, "bin", "wireguard-go"), "golang.zx2c4.com/wireguard")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build wireguard-go: %w: %s", err, out)
	}
	hostname := "machine-" + strconv.Itoa(n)
	kubeconfig, err := os.ReadFile(filepath.Join(machinesDir, "kubeconfig-path"))
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "machine %s (network namespace %s, %s), a real node's machine, running the join command:\n  %s\n", hostname, ns, nsEnd, command)
	began := time.Now()
	if err := realMachineCommand(n, ns, home, hostname, command, stdout, stderr); err != nil {
		return fmt.Errorf("the join command on %s: %w", hostname, err)
	}
	fmt.Fprintf(stdout, "%s joined\n", hostname)
	return showNode(ctx, strings.TrimSpace(string(kubeconfig)), hostname, began, stdout)
}

// mintJoinCommand mints a join key for the playground's machines (a day,
// any number of uses) and returns its join command.
func mintJoinCommand(url, adminToken string) (string, error) {
	req, err := http.NewRequest("POST", url+"/v1/nodes/join-keys", strings.NewReader(`{"kind":"org","org":"playground","ttl_seconds":86400}`))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var minted struct {
		JoinCommand string `json:"join_command"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&minted); err != nil || resp.StatusCode != http.StatusCreated || minted.JoinCommand == "" {
		return "", fmt.Errorf("mint the machines' join key: %d %v", resp.StatusCode, err)
	}
	return minted.JoinCommand, nil
}
