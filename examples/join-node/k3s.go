package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"

	"gridweave.dev/gridweave/node/joinagent"
)

// k3sAgentFlags are the flags the k3s step passes to `k3s agent`, each
// defined by k3s's own CLI in k3s-io/k3s pkg/cli/cmds/agent.go (read at
// commit 00cc29ba2779; k3s's module is not served by the Go module proxy,
// so it cannot be imported and checked by the compiler):
var k3sAgentFlags = []struct{ flag, definedBy string }{
	{"--server", `cli.StringFlag{Name: "server,s", EnvVar: K3S_URL} in NewAgentCommand`},
	{"--token-file", `cli.StringFlag{Name: "token-file", EnvVar: K3S_TOKEN_FILE} in NewAgentCommand`},
	{"--node-ip", `NodeIPFlag: cli.StringSliceFlag{Name: "node-ip,i"}`},
	{"--flannel-iface", `FlannelIfaceFlag: cli.StringFlag{Name: "flannel-iface"}`},
	{"--node-name", `NodeNameFlag: cli.StringFlag{Name: "node-name", EnvVar: K3S_NODE_NAME}`},
	{"--node-label", `NodeLabels: cli.StringSliceFlag{Name: "node-label"}, repeated per label`},
	// Added after that commit (k3s-io/k3s#8751; `k3s agent --help`:
	// "--default-runtime value (agent/runtime) Set the default runtime in
	// containerd"), passed only on a machine with the NVIDIA toolkit.
	{"--default-runtime", `DefaultRuntime: cli.StringFlag{Name: "default-runtime"} (agent/runtime)`},
}

// k3sAgentArgs is the k3s agent's command line: the server and a token
// file (the token never on a command line), the node's VPN address and
// tunnel for flannel, its name, the labels the master needs; on a machine
// with the NVIDIA Container Toolkit (nvidia, true), its runtime as
// containerd's default, so pods given GPUs see them (k3s registers the
// runtime, as nvidia, when it finds the toolkit, but does not make it the
// default).
func k3sAgentArgs(binary string, join joinagent.K3sJoin, iface, tokenFile string, nvidia bool) []string {
	args := []string{binary, "agent", "--server", join.URL, "--token-file", tokenFile,
		"--node-ip", join.NodeIP.String(), "--flannel-iface", iface, "--node-name", join.NodeName}
	for _, l := range join.NodeLabels {
		args = append(args, "--node-label", l)
	}
	if nvidia {
		args = append(args, "--default-runtime", "nvidia")
	}
	return args
}

// nodeLabel is a Kubernetes label as key=value: nothing a shell or
// systemd would expand or split.
var nodeLabel = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._/-]{0,252}[A-Za-z0-9])?=([A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?)?$`)

// k3sUnit is k3s-agent.service running args: restarted by systemd, and
// started at boot.
func k3sUnit(args []string) string {
	return `# Written by the Gridweave join agent: the k3s agent of this node,
# joined to its master's cluster through the WireGuard tunnel.
[Unit]
Description=k3s agent (Gridweave node)
Wants=network-online.target
After=network-online.target

[Service]
Type=exec
ExecStart=` + strings.Join(args, " ") + `
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

// k3sService is the built-in k3s step: the agent token into a 0600 file,
// then k3s agent as k3s-agent.service where systemd runs the machine
// (restarted by it, started at boot), else started directly in the
// background (a machine, or a test's namespace, without systemd).
func k3sService(binary, iface, stateDir, unitDir string, log *slog.Logger) func(context.Context, joinagent.K3sJoin) error {
	return func(ctx context.Context, join joinagent.K3sJoin) error {
		if _, err := os.Stat(binary); err != nil {
			log.Warn("k3s is not installed (and the master serves none): the k3s agent step is skipped; install k3s to join Kubernetes", "path", binary)
			return nil
		}
		tokenFile, err := k3sToken(stateDir, join)
		if err != nil {
			return err
		}
		_, toolkit := exec.LookPath("nvidia-container-runtime")
		args := k3sAgentArgs(binary, join, iface, tokenFile, toolkit == nil)
		if _, err := os.Stat("/run/systemd/system"); err == nil {
			return startUnit(ctx, unitDir, args, log)
		}
		return startInBackground(exec.Command(args[0], args[1:]...), stateDir, log)
	}
}

// k3sToken checks the labels the master asked for and writes the agent
// token to its 0600 file in the state directory, whose path it returns.
func k3sToken(stateDir string, join joinagent.K3sJoin) (string, error) {
	for _, label := range join.NodeLabels {
		if !nodeLabel.MatchString(label) {
			return "", fmt.Errorf("the master asked for Node label %q, which is not key=value of Kubernetes label characters", label)
		}
	}
	tokenFile := filepath.Join(stateDir, joinagent.K3sTokenFile)
	if err := os.WriteFile(tokenFile, []byte(join.Token+"\n"), 0o600); err != nil {
		return "", err
	}
	return tokenFile, nil
}

// startInBackground starts the k3s agent (or the command that replaces
// it) in a session of its own, so it outlives the join agent, its output
// in the state directory.
func startInBackground(cmd *exec.Cmd, stateDir string, log *slog.Logger) error {
	out, err := os.OpenFile(filepath.Join(stateDir, "k3s-agent.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the k3s agent: %w", err)
	}
	log.Info("k3s agent started", "pid", cmd.Process.Pid, "log", out.Name())
	return cmd.Process.Release()
}

// startUnit writes k3s-agent.service and (re)starts it.
func startUnit(ctx context.Context, unitDir string, args []string, log *slog.Logger) error {
	path, err := startSystemdUnit(ctx, unitDir, "k3s-agent.service", k3sUnit(args))
	if err != nil {
		return err
	}
	log.Info("k3s agent running as a systemd unit", "unit", path)
	return nil
}
