package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"gridweave.dev/gridweave/node/joinagent"
	"gridweave.dev/gridweave/node/kubeletnode"
)

// nodeUnitName is the kubelet join mode's systemd unit: the node's
// supervisor (containerd and the kubelet).
const nodeUnitName = "gridweave-node.service"

// nodeDir is where the kubelet join mode keeps the node: its
// configuration, containerd's root, the kubelet's root, certificates and
// logs, and the master's kubelet (bin/kubelet).
func nodeDir(stateDir string) string { return filepath.Join(stateDir, "node") }

// kubeletBinary is where the master's kubelet is installed.
func kubeletBinary(stateDir string) string { return filepath.Join(nodeDir(stateDir), "bin", "kubelet") }

// kubeletService is the kubelet join mode's step: it checks the machine
// has containerd, runc and the CNI plugins, writes the node's
// configuration, and (re)starts the node's supervisor (agent --run-node):
// as gridweave-node.service where systemd runs the machine, else in the
// background in a session of its own.
func kubeletService(agent, stateDir, unitDir string, log *slog.Logger) func(context.Context, joinagent.KubeletJoin) error {
	return func(ctx context.Context, join joinagent.KubeletJoin) error {
		for _, label := range join.NodeLabels {
			if !nodeLabel.MatchString(label) {
				return fmt.Errorf("the master asked for Node label %q, which is not key=value of Kubernetes label characters", label)
			}
		}
		cfg := kubeletnode.Config{Dir: nodeDir(stateDir), NodeName: join.NodeName, NodeIP: join.NodeIP, APIServer: join.APIServer,
			CACertPEM: []byte(join.CACertPEM), TLSServerName: join.TLSServerName, BootstrapToken: join.BootstrapToken, Kubelet: join.Kubelet,
			NodeLabels: join.NodeLabels, ClusterCIDR: join.ClusterCIDR, NodeCIDRMask: join.NodeCIDRMask, ClusterDomain: join.ClusterDomain}
		for _, a := range join.ClusterDNS {
			cfg.ClusterDNS = append(cfg.ClusterDNS, a.String())
		}
		// A GPU machine's NVIDIA Container Toolkit: the runtime pods
		// given GPUs need.
		if runtime, err := exec.LookPath("nvidia-container-runtime"); err == nil {
			cfg.NVIDIARuntime = runtime
		}
		if err := kubeletnode.MissingError(cfg.Check()); err != nil {
			return err
		}
		// The owner's kubelet drop-ins, refused here rather than by a
		// supervisor whose kubelet would never start.
		if _, err := cfg.KubeletCommand(); err != nil {
			return err
		}
		if err := cfg.Write(); err != nil {
			return err
		}
		if err := kubeletnode.SaveConfig(cfg); err != nil {
			return err
		}
		args := []string{agent, "--run-node", "--state-dir", stateDir}
		if _, err := os.Stat("/run/systemd/system"); err == nil {
			return startNodeUnit(ctx, unitDir, args, log)
		}
		if err := kubeletnode.StopSupervisor(cfg, time.Minute); err != nil {
			return err
		}
		out, err := os.OpenFile(filepath.Join(cfg.Dir, "supervisor.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		defer out.Close()
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Stdout, cmd.Stderr = out, out
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("start the node's supervisor: %w", err)
		}
		log.Info("node supervisor started (containerd and the kubelet)", "pid", cmd.Process.Pid, "log", out.Name())
		return cmd.Process.Release()
	}
}

// nodeUnit is gridweave-node.service running args.
func nodeUnit(args []string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = systemdQuote(a)
	}
	return `# Written by the Gridweave join agent: this machine's Kubernetes node
# (containerd and the kubelet, joined through the WireGuard tunnel).
# ` + "`join-node --leave`" + ` stops it and removes it with the node.
[Unit]
Description=Gridweave node (containerd and the kubelet)
Wants=network-online.target
After=network-online.target

[Service]
Type=exec
ExecStart=` + strings.Join(quoted, " ") + `
# containerd's shims and the pods outlive a restart of the supervisor.
KillMode=process
Delegate=yes
LimitNOFILE=1048576
LimitNPROC=infinity
LimitCORE=infinity
Restart=always
RestartSec=5s

[Install]
WantedBy=multi-user.target
`
}

func startNodeUnit(ctx context.Context, unitDir string, args []string, log *slog.Logger) error {
	path, err := startSystemdUnit(ctx, unitDir, nodeUnitName, nodeUnit(args))
	if err != nil {
		return err
	}
	log.Info("node running as a systemd unit (containerd and the kubelet)", "unit", path)
	return nil
}

// runNode is --run-node: the node's supervisor, until a signal.
func runNode(ctx context.Context, stateDir string, log *slog.Logger) error {
	cfg, err := kubeletnode.LoadConfig(nodeDir(stateDir))
	if errors.Is(err, os.ErrNotExist) {
		return errors.New("this machine runs no node (no kubelet-mode join here)")
	}
	if err != nil {
		return err
	}
	return kubeletnode.Supervise(ctx, cfg, log)
}

// stopNode stops the node's supervisor and takes the node away
// (kubeletnode.Teardown): its pods, mounts, cgroups, bridge and files. A
// machine of the k3s mode has none: nothing to do.
func stopNode(ctx context.Context, stateDir, unitDir string, log *slog.Logger) error {
	cfg, err := kubeletnode.LoadConfig(nodeDir(stateDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := removeSystemdUnit(ctx, unitDir, nodeUnitName); err != nil {
		return err
	}
	log.Info("stopping the node: its supervisor, then its pods and files")
	if err := kubeletnode.StopSupervisor(cfg, time.Minute); err != nil {
		return err
	}
	if err := kubeletnode.Teardown(ctx, cfg, log); err != nil {
		return err
	}
	log.Info("node stopped and removed: containerd, the kubelet, their pods and files")
	return nil
}

// ctrImages is the worker image step of the kubelet join mode: the
// node's own containerd, through ctr.
type ctrImages struct{ socket string }

func (c ctrImages) ctr(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "ctr", append([]string{"--address", c.socket, "--namespace", "k8s.io"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return out, nil
}

func (c ctrImages) Has(ctx context.Context, name string) (bool, error) {
	out, err := c.ctr(ctx, "images", "ls", "--quiet")
	if err != nil {
		return false, err
	}
	want := fullImageName(name)
	for _, line := range strings.Split(string(out), "\n") {
		if strings.TrimSpace(line) == want {
			return true, nil
		}
	}
	return false, nil
}

func (c ctrImages) Import(ctx context.Context, tarball string) error {
	_, err := c.ctr(ctx, "images", "import", tarball)
	return err
}

// fullImageName is name as containerd keeps it: docker.io/library/ before
// a name without a registry.
func fullImageName(name string) string {
	first, rest, found := strings.Cut(name, "/")
	switch {
	case !found:
		return "docker.io/library/" + name
	case strings.ContainsAny(first, ".:") || first == "localhost":
		return name
	default:
		return "docker.io/" + first + "/" + rest
	}
}
