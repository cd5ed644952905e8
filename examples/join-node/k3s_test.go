package main

import (
	"bytes"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gridweave.dev/gridweave/node/joinagent"
)

// TestK3sUnitVerifies: the k3s-agent.service the k3s step writes passes
// systemd-analyze verify, and runs exactly the flags of k3sAgentFlags
// (the table that cites where k3s defines each), the token in a file.
func TestK3sUnitVerifies(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Fatalf("systemd-analyze (Debian's systemd package; .ci/run installs it): %v", err)
	}
	dir := t.TempDir()
	binary := filepath.Join(dir, "k3s")
	if err := os.WriteFile(binary, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	join := joinagent.K3sJoin{URL: "https://198.19.0.1:6443", Token: "K10secret::node:token", NodeIP: netip.MustParseAddr("198.19.0.7"),
		NodeName: "gpu-7", NodeLabels: []string{"gridweave.dev/node=0123456789abcdef0123456789abcdef01234567"}}
	// (On a machine with the NVIDIA toolkit: every flag of the table.)
	args := k3sAgentArgs(binary, join, "gridweave0", filepath.Join(dir, "k3s-agent-token"), true)
	if plain := k3sAgentArgs(binary, join, "gridweave0", filepath.Join(dir, "k3s-agent-token"), false); slices.Contains(plain, "--default-runtime") {
		t.Errorf("a machine without the NVIDIA toolkit gets --default-runtime: %v", plain)
	}
	unit := k3sUnit(args)
	if strings.Contains(unit, join.Token) {
		t.Fatal("the unit holds the agent token")
	}
	var flags []string
	for _, a := range args[2:] {
		if strings.HasPrefix(a, "--") && !slices.Contains(flags, a) {
			flags = append(flags, a)
		}
	}
	var cited []string
	for _, f := range k3sAgentFlags {
		cited = append(cited, f.flag)
	}
	if !slices.Equal(flags, cited) {
		t.Errorf("the unit passes %v; the table cites %v", flags, cited)
	}
	path := filepath.Join(dir, "k3s-agent.service")
	if err := os.WriteFile(path, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("systemd-analyze", "verify", path).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) != 0 {
		t.Errorf("systemd-analyze verify: %v\n%s\n%s", err, out, unit)
	}
}

// TestNodeUnitVerifies: the gridweave-node.service the kubelet join mode
// writes passes systemd-analyze verify, runs the agent's supervisor with
// the state directory, and leaves the pods' shims alone when it stops
// (KillMode=process).
func TestNodeUnitVerifies(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Fatalf("systemd-analyze (Debian's systemd package; .ci/run installs it): %v", err)
	}
	dir := t.TempDir()
	agent := filepath.Join(dir, "join node") // a space, quoted in ExecStart
	if err := os.WriteFile(agent, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	unit := nodeUnit([]string{agent, "--run-node", "--state-dir", "/var/lib/gridweave"})
	for _, want := range []string{`ExecStart="` + agent + `" --run-node --state-dir /var/lib/gridweave`, "KillMode=process", "Delegate=yes", "Restart=always"} {
		if !strings.Contains(unit, want) {
			t.Errorf("the unit lacks %q:\n%s", want, unit)
		}
	}
	path := filepath.Join(dir, nodeUnitName)
	if err := os.WriteFile(path, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("systemd-analyze", "verify", path).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) != 0 {
		t.Errorf("systemd-analyze verify: %v\n%s\n%s", err, out, unit)
	}
}

// TestFullImageName: the worker image's name as containerd lists it.
func TestFullImageName(t *testing.T) {
	for name, want := range map[string]string{
		"gridweave-worker:e2e":              "docker.io/library/gridweave-worker:e2e",
		"rayproject/ray:2.54.0":             "docker.io/rayproject/ray:2.54.0",
		"gridweave.dev/podnet:test":         "gridweave.dev/podnet:test",
		"localhost/worker:1":                "localhost/worker:1",
		"registry.local:5000/ray/worker:v1": "registry.local:5000/ray/worker:v1",
	} {
		if got := fullImageName(name); got != want {
			t.Errorf("fullImageName(%q) = %q, want %q", name, got, want)
		}
	}
}
