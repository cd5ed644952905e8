package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"

	"gridweave.dev/gridweave/node/joinagent"
)

// version is the agent's version, for the master's version gate.
var version = "0.0.1"

// defaultK3sCommand starts the k3s agent in the background when k3s is
// installed; K3S_URL, K3S_TOKEN, NODE_IP, NODE_NAME and NODE_LABELS (the
// labels the master needs on the Node, space-separated key=value, no
// spaces within) come from the join. k3s reads the token from K3S_TOKEN
// itself: on the command line it would show in the process list.
const defaultK3sCommand = `exec k3s agent --server "$K3S_URL" --node-ip "$NODE_IP" --flannel-iface "$WG_INTERFACE" --node-name "$NODE_NAME" $(for l in $NODE_LABELS; do printf -- '--node-label=%s ' "$l"; done)`

// The worker image step's default commands, for k3s's containerd.
const (
	defaultImageCheckCommand  = `k3s crictl inspecti "$IMAGE_NAME" >/dev/null 2>&1`
	defaultImageImportCommand = `k3s ctr images import "$IMAGE_TAR"`
)

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("join-node", flag.ContinueOnError)
	flags.SetOutput(stderr)
	master := flags.String("master", "", "the master's URL, e.g. https://203.0.113.7:8800 (required)")
	pin := flags.String("pin", "", "the master's certificate pin, sha256//<base64> (MASTER_PIN of the join command); every call accepts only that key")
	keyFile := flags.String("key-file", "", "a file holding the join key (first join only); join-node.sh passes the key in "+joinKeyVariable+" instead")
	leave := flags.Bool("leave", false, "leave the cluster: release this node, take the tunnel down, delete the identity")
	stateDir := flags.String("state-dir", "/var/lib/gridweave", "where the node's identity is kept (0600)")
	hostname := flags.String("hostname", "", "the node's name (default: this machine's hostname)")
	iface := flags.String("interface", "gridweave0", "the WireGuard device")
	k3sCommand := flags.String("k3s-command", defaultK3sCommand, "shell command of the k3s agent step, started in the background with K3S_URL, K3S_TOKEN, NODE_IP, NODE_NAME, NODE_LABELS and WG_INTERFACE set; empty skips it")
	imageImport := flags.String("image-import-command", defaultImageImportCommand, "shell command importing the master's worker image tarball (IMAGE_TAR) into the container runtime; empty skips the step")
	imageCheck := flags.String("image-check-command", defaultImageCheckCommand, "shell command that exits 0 when the container runtime has the image IMAGE_NAME")
	showVersion := flags.Bool("version", false, "print the agent's version")
	if err := flags.Parse(args); err != nil {
		return 2
	}
	if *showVersion {
		fmt.Fprintln(stdout, version)
		return 0
	}
	if *master == "" {
		fmt.Fprintln(stderr, "join-node: --master is required (join-node.sh sets it from MASTER_IP)")
		return 2
	}
	key, err := joinKey(*keyFile)
	if err != nil {
		fmt.Fprintln(stderr, "join-node:", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	opts := joinagent.Options{Master: *master, MasterPin: *pin, StateDir: *stateDir, Key: key, Hostname: *hostname, Version: version,
		Tunnel: &joinagent.WireGuardTunnel{Interface: *iface}, Logger: log}
	if *k3sCommand != "" {
		opts.K3sAgent = k3sStep(*k3sCommand, *iface, *stateDir, log)
	}
	if *imageImport != "" {
		_, err := exec.LookPath("k3s")
		if *imageImport == defaultImageImportCommand && err != nil {
			log.Warn("k3s is not installed: the worker image step is skipped; the container runtime pulls the image, or pass --image-import-command")
		} else {
			opts.Images = joinagent.CommandImageRuntime{CheckCommand: *imageCheck, ImportCommand: *imageImport}
		}
	}
	if *leave {
		if err := joinagent.Leave(ctx, opts); err != nil {
			fmt.Fprintln(stderr, "join-node:", err)
			return 1
		}
		fmt.Fprintln(stdout, "left the cluster; this machine's tunnel and identity are gone")
		return 0
	}
	res, err := joinagent.Join(ctx, opts)
	if err != nil {
		fmt.Fprintln(stderr, "join-node:", err)
		var me *joinagent.MasterError
		if errors.As(err, &me) && me.Status == http.StatusUpgradeRequired {
			fmt.Fprintln(stderr, "join-node: run the join command again: join-node.sh fetches the agent that matches the master, and this machine keeps its identity")
		}
		return 1
	}
	group := res.WorkerGroup
	if group == "" {
		group = "none (CPU-only)"
	}
	fmt.Fprintf(stdout, "joined as %s with VPN address %s; %d GPUs; Ray worker group %s\n", res.Hostname, res.VPNIP, res.GPUs, group)
	return 0
}

// nodeLabel is a Kubernetes label as key=value: nothing a shell expands
// or splits, so the k3s command can pass it unquoted.
var nodeLabel = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._/-]{0,252}[A-Za-z0-9])?=([A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?)?$`)

// joinKeyVariable carries the join key from join-node.sh to the agent:
// the environment of a root process is readable by root only, its
// command line by every user.
const joinKeyVariable = "GRIDWEAVE_JOIN_KEY"

// joinKey reads the key from keyFile, else from the environment, and
// takes it out of the environment so no child (the k3s agent) inherits it.
func joinKey(keyFile string) (string, error) {
	key := os.Getenv(joinKeyVariable)
	if err := os.Unsetenv(joinKeyVariable); err != nil {
		return "", err
	}
	if keyFile != "" {
		raw, err := os.ReadFile(keyFile)
		if err != nil {
			return "", fmt.Errorf("--key-file: %w", err)
		}
		key = strings.TrimSpace(string(raw))
	}
	return key, nil
}

// k3sStep starts command in the background (its output in the state
// directory), unless k3s is not installed, which it says.
func k3sStep(command, iface, stateDir string, log *slog.Logger) func(context.Context, joinagent.K3sJoin) error {
	return func(ctx context.Context, join joinagent.K3sJoin) error {
		if command == defaultK3sCommand {
			if _, err := exec.LookPath("k3s"); err != nil {
				log.Warn("k3s is not installed: the k3s agent step is skipped; install k3s or pass --k3s-command")
				return nil
			}
		}
		out, err := os.OpenFile(filepath.Join(stateDir, "k3s-agent.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		defer out.Close()
		cmd := exec.Command("sh", "-c", command)
		for _, label := range join.NodeLabels {
			if !nodeLabel.MatchString(label) {
				return fmt.Errorf("the master asked for Node label %q, which is not key=value of Kubernetes label characters", label)
			}
		}
		cmd.Env = append(os.Environ(), "K3S_URL="+join.URL, "K3S_TOKEN="+join.Token, "NODE_IP="+join.NodeIP.String(), "WG_INTERFACE="+iface,
			"NODE_NAME="+join.NodeName, "NODE_LABELS="+strings.Join(join.NodeLabels, " "))
		cmd.Stdout, cmd.Stderr = out, out
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // outlives the agent
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("start %q: %w", command, err)
		}
		log.Info("k3s agent started", "pid", cmd.Process.Pid, "log", out.Name())
		return cmd.Process.Release()
	}
}
