package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"unicode"
)

// linkUnitName is the link service's systemd unit.
const linkUnitName = "gridweave-agent.service"

// linkServiceArgs is the link service's command line: this agent with the
// join's own flags (the master, its pin, the state directory, the tunnel,
// the k3s step: what a join again needs after a reboot) and --serve; never
// the key.
func linkServiceArgs(agent string, args []string) []string {
	out := []string{agent}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			out = append(out, a) // a flag's value
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch name {
		case "key-file":
			if !hasValue {
				i++ // and its value
			}
			continue
		case "serve", "leave", "version", "run-node":
			continue
		}
		out = append(out, a)
	}
	return append(out, "--serve")
}

// linkUnit is gridweave-agent.service running args: restarted by systemd
// when it fails (it exits 0 once the machine left), started at boot after
// the network.
func linkUnit(args []string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = systemdQuote(a)
	}
	return `# Written by the Gridweave join agent: this node's link service. It keeps
# direct WireGuard links to the other nodes, with the master as fallback,
# and reports them to the master. ` + "`join-node --leave`" + ` removes it.
[Unit]
Description=Gridweave node link service
Wants=network-online.target
After=network-online.target

[Service]
Type=exec
ExecStart=` + strings.Join(quoted, " ") + `
Restart=on-failure
RestartSec=5s

[Install]
WantedBy=multi-user.target
`
}

// systemdQuote quotes an argument of ExecStart= where it needs it; a %
// (a specifier to systemd) is doubled.
func systemdQuote(a string) string {
	a = strings.ReplaceAll(a, "%", "%%")
	if a != "" && !strings.ContainsAny(a, " \t\"'\\;$") {
		return a
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, `$`, `$$`).Replace(a) + `"`
}

// installLinkService writes and starts the link service's unit where
// systemd runs the machine; elsewhere it says how to run the service.
func installLinkService(ctx context.Context, unitDir string, args []string, log *slog.Logger) error {
	for _, a := range args {
		if strings.ContainsFunc(a, unicode.IsControl) {
			return fmt.Errorf("the argument %q holds a control character: it cannot go into a unit", a)
		}
	}
	if _, err := os.Stat("/run/systemd/system"); err != nil {
		log.Info("systemd does not run this machine: run the link service yourself to keep direct links to the other nodes", "command", strings.Join(args, " "))
		return nil
	}
	path, err := startSystemdUnit(ctx, unitDir, linkUnitName, linkUnit(args))
	if err != nil {
		return err
	}
	log.Info("link service running as a systemd unit", "unit", path)
	return nil
}

// removeLinkService stops and removes the unit, if there is one.
func removeLinkService(ctx context.Context, unitDir string) error {
	return removeSystemdUnit(ctx, unitDir, linkUnitName)
}

// startSystemdUnit writes unit as unitDir/name, then enables and
// (re)starts it; it returns the unit's path.
func startSystemdUnit(ctx context.Context, unitDir, name, unit string) (string, error) {
	path := filepath.Join(unitDir, name)
	if err := os.WriteFile(path, []byte(unit), 0o644); err != nil {
		return "", err
	}
	for _, step := range [][]string{{"daemon-reload"}, {"enable", name}, {"restart", name}} {
		if err := systemctl(ctx, step...); err != nil {
			return "", err
		}
	}
	return path, nil
}

// removeSystemdUnit disables and stops the unit unitDir/name (where
// systemd runs the machine) and removes its file; without one, nothing.
func removeSystemdUnit(ctx context.Context, unitDir, name string) error {
	path := filepath.Join(unitDir, name)
	if _, err := os.Stat(path); err != nil {
		return nil
	}
	if _, err := os.Stat("/run/systemd/system"); err == nil {
		if err := systemctl(ctx, "disable", "--now", name); err != nil {
			return err
		}
	}
	return os.Remove(path)
}

func systemctl(ctx context.Context, args ...string) error {
	if out, err := exec.CommandContext(ctx, "systemctl", args...).CombinedOutput(); err != nil {
		return errors.Join(fmt.Errorf("systemctl %s: %w", strings.Join(args, " "), err), errors.New(strings.TrimSpace(string(out))))
	}
	return nil
}

// endpointList is a repeatable flag of address:port.
type endpointList []netip.AddrPort

func (l *endpointList) String() string {
	out := make([]string, len(*l))
	for i, e := range *l {
		out[i] = e.String()
	}
	return strings.Join(out, ",")
}

func (l *endpointList) Set(v string) error {
	ep, err := netip.ParseAddrPort(v)
	if err != nil || ep.Port() == 0 {
		return fmt.Errorf("%q is not address:port", v)
	}
	*l = append(*l, ep)
	return nil
}
