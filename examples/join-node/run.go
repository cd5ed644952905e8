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
	"strconv"
	"strings"
	"time"

	"gridweave.dev/gridweave/api"
	"gridweave.dev/gridweave/node/joinagent"
	"gridweave.dev/gridweave/node/kubeletnode"
)

// version is the agent's version, for the master's version gate.
var version = "0.0.1"

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
	k3sMode := flags.String("k3s", "service", "the k3s agent step: service (k3s-agent.service where systemd runs the machine, else k3s agent started directly) or off")
	k3sBinary := flags.String("k3s-binary", "/usr/local/bin/k3s", "where k3s is; when it is missing, the master's is installed there")
	k3sCommand := flags.String("k3s-command", "", "a shell command run in the background instead of the built-in k3s step, with K3S_URL, K3S_TOKEN_FILE, NODE_IP, NODE_NAME, NODE_LABELS and WG_INTERFACE set")
	unitDir := flags.String("systemd-unit-dir", "/etc/systemd/system", "where the k3s-agent.service and "+linkUnitName+" units are written")
	imageImport := flags.String("image-import-command", defaultImageImportCommand, "shell command importing the master's worker image tarball (IMAGE_TAR) into the container runtime; empty skips the step")
	imageCheck := flags.String("image-check-command", defaultImageCheckCommand, "shell command that exits 0 when the container runtime has the image IMAGE_NAME")
	showVersion := flags.Bool("version", false, "print the agent's version")
	serve := flags.Bool("serve", false, "run the link service (after a join): direct WireGuard links to the other nodes, the master as fallback; the join installs it as "+linkUnitName+" where systemd runs the machine")
	runNodeFlag := flags.Bool("run-node", false, "run this machine's Kubernetes node (kubelet join mode): containerd and the kubelet, supervised, until a signal; the join starts it as "+nodeUnitName+" where systemd runs the machine, else in the background")
	hubOnly := flags.Bool("hub-only", false, "with --serve: link to no node directly, everything through the master")
	directLinks := flags.String("direct-links", "auto", "with --serve: which nodes to link directly: all, on-demand (those this machine exchanges traffic with, by its connection tracking), or auto (on demand above "+strconv.Itoa(joinagent.OnDemandAbove)+" other nodes, else all)")
	idleAfter := flags.Duration("idle-after", 5*time.Minute, "with --direct-links on-demand (or auto, above its bound): drop a direct link after this long without traffic")
	var advertise endpointList
	flags.Var(&advertise, "advertise-endpoint", "with --serve: address:port where this node's WireGuard device can be reached besides the address the master sees (repeatable)")
	if err := flags.Parse(args); err != nil {
		return 2
	}
	if *showVersion {
		fmt.Fprintln(stdout, version)
		return 0
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	if *runNodeFlag {
		if err := runNode(ctx, *stateDir, log); err != nil {
			fmt.Fprintln(stderr, "join-node:", err)
			return 1
		}
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
	agent, agentErr := os.Executable()
	opts := joinagent.Options{Master: *master, MasterPin: *pin, StateDir: *stateDir, Key: key, Hostname: *hostname, Version: version,
		Tunnel: &joinagent.WireGuardTunnel{Interface: *iface}, Logger: log}
	switch {
	case *k3sMode == "off":
	case *k3sCommand != "":
		opts.K3sAgent = k3sStep(*k3sCommand, *iface, *stateDir, log)
	case *k3sMode == "service":
		opts.K3sAgent, opts.K3sBinary = k3sService(*k3sBinary, *iface, *stateDir, *unitDir, log), *k3sBinary
	default:
		fmt.Fprintf(stderr, "join-node: --k3s %q is neither service nor off\n", *k3sMode)
		return 2
	}
	if *imageImport != "" {
		images := joinagent.CommandImageRuntime{CheckCommand: *imageCheck, ImportCommand: *imageImport}
		if *imageImport == defaultImageImportCommand {
			// k3s may be installed by the k3s step, which runs first.
			opts.Images = k3sImages{images, log}
		} else {
			opts.Images = images
		}
	}
	if agentErr == nil {
		opts.KubeletAgent, opts.KubeletBinary = kubeletService(agent, *stateDir, *unitDir, log), kubeletBinary(*stateDir)
		opts.KubeletImages = ctrImages{socket: kubeletnode.Config{}.Socket()}
	}
	opts.AdvertiseEndpoints, opts.HubOnly = advertise, *hubOnly
	switch joinagent.DirectLinks(*directLinks) {
	case joinagent.DirectLinksAuto, joinagent.DirectLinksAll, joinagent.DirectLinksOnDemand:
	default:
		fmt.Fprintf(stderr, "join-node: --direct-links %q is none of auto, all, on-demand\n", *directLinks)
		return 2
	}
	if *idleAfter <= 0 {
		fmt.Fprintf(stderr, "join-node: --idle-after %s must be a positive duration (e.g. 5m)\n", *idleAfter)
		return 2
	}
	opts.DirectLinks, opts.IdleAfter = joinagent.DirectLinks(*directLinks), *idleAfter
	if *serve {
		err := joinagent.Serve(ctx, opts)
		var me *joinagent.MasterError
		if errors.As(err, &me) && me.Status == http.StatusUnauthorized && me.Code == api.CodeInvalidNodeToken {
			// Disconnected by the master: the node goes too.
			if serr := stopNode(context.WithoutCancel(ctx), *stateDir, *unitDir, log); serr != nil {
				fmt.Fprintln(stderr, "join-node: stop the node:", serr)
			}
		}
		if err != nil {
			fmt.Fprintln(stderr, "join-node:", err)
			return 1
		}
		return 0
	}
	if *leave {
		if err := removeLinkService(ctx, *unitDir); err != nil {
			fmt.Fprintln(stderr, "join-node: stop the link service:", err)
			return 1
		}
		// The master first: in the kubelet join mode it drains the Node
		// while the kubelet still runs to stop its pods. Then the node;
		// a leave again finishes what a failure here left.
		if err := joinagent.Leave(ctx, opts); err != nil {
			fmt.Fprintln(stderr, "join-node:", err)
			return 1
		}
		if err := stopNode(ctx, *stateDir, *unitDir, log); err != nil {
			fmt.Fprintln(stderr, "join-node: stop the node:", err)
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
	if agentErr != nil {
		log.Warn("the link service is not installed: where is this agent?", "error", agentErr)
	} else if err := installLinkService(ctx, *unitDir, linkServiceArgs(agent, args), log); err != nil {
		// The machine joined: its traffic goes through the master until
		// the service runs.
		fmt.Fprintln(stderr, "join-node: warning: the link service (direct links to the other machines) is not installed:", err)
	}
	group := res.WorkerGroup
	if group == "" {
		group = "none (CPU-only)"
	}
	fmt.Fprintf(stdout, "joined as %s with VPN address %s; %d GPUs; Ray worker group %s\n", res.Hostname, res.VPNIP, res.GPUs, group)
	return 0
}

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

// k3sStep starts a custom command in the background (its output in the
// state directory) instead of the built-in step.
func k3sStep(command, iface, stateDir string, log *slog.Logger) func(context.Context, joinagent.K3sJoin) error {
	return func(ctx context.Context, join joinagent.K3sJoin) error {
		tokenFile, err := k3sToken(stateDir, join)
		if err != nil {
			return err
		}
		cmd := exec.Command("sh", "-c", command)
		cmd.Env = append(os.Environ(), "K3S_URL="+join.URL, "K3S_TOKEN_FILE="+tokenFile, "NODE_IP="+join.NodeIP.String(), "WG_INTERFACE="+iface,
			"NODE_NAME="+join.NodeName, "NODE_LABELS="+strings.Join(join.NodeLabels, " "))
		return startInBackground(cmd, stateDir, log)
	}
}

// k3sImages is the default worker image step, through k3s's containerd:
// skipped, and said, when k3s is not there when the step runs (after the
// k3s step, which may have installed it).
type k3sImages struct {
	joinagent.CommandImageRuntime
	log *slog.Logger
}

func (k k3sImages) Has(ctx context.Context, name string) (bool, error) {
	if _, err := exec.LookPath("k3s"); err != nil {
		return false, nil
	}
	return k.CommandImageRuntime.Has(ctx, name)
}

func (k k3sImages) Import(ctx context.Context, tarball string) error {
	if _, err := exec.LookPath("k3s"); err != nil {
		k.log.Warn("k3s is not installed: the worker image is not imported; the container runtime pulls it, or pass --image-import-command")
		return nil
	}
	return k.CommandImageRuntime.Import(ctx, tarball)
}
