package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestLinkUnitVerifies: the link service's unit passes systemd-analyze
// verify and runs this agent with the join's flags and --serve, never the
// key.
func TestLinkUnitVerifies(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Fatalf("systemd-analyze (Debian's systemd package; .ci/run installs it): %v", err)
	}
	dir := t.TempDir()
	agent := filepath.Join(dir, "join-node")
	if err := os.WriteFile(agent, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	join := []string{"--master", "https://203.0.113.7:8800", "--state-dir", "/var/lib/gridweave", "--pin", "sha256//AAAA+/=", "--key-file", "/tmp/key",
		"--key-file=/tmp/other", "--interface", "gw 0", "--advertise-endpoint", "192.0.2.7:51820", "--hostname", "serve"}
	args := linkServiceArgs(agent, join)
	want := []string{agent, "--master", "https://203.0.113.7:8800", "--state-dir", "/var/lib/gridweave", "--pin", "sha256//AAAA+/=",
		"--interface", "gw 0", "--advertise-endpoint", "192.0.2.7:51820", "--hostname", "serve", "--serve"}
	if !slices.Equal(args, want) {
		t.Errorf("the link service runs %q, want %q", args, want)
	}
	unit := linkUnit(args)
	if strings.Contains(unit, "/tmp/key") || strings.Contains(unit, "/tmp/other") {
		t.Errorf("the unit names the key file:\n%s", unit)
	}
	if !strings.Contains(unit, `"gw 0"`) {
		t.Errorf("an argument with a space is not quoted:\n%s", unit)
	}
	path := filepath.Join(dir, linkUnitName)
	if err := os.WriteFile(path, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("systemd-analyze", "verify", path).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) != 0 {
		t.Errorf("systemd-analyze verify: %v\n%s\n%s", err, out, unit)
	}
}

// TestLinkUnitRefusesControlCharacters: a flag value with a newline would
// add a directive to the unit; it is refused.
func TestLinkUnitRefusesControlCharacters(t *testing.T) {
	dir := t.TempDir()
	err := installLinkService(context.Background(), dir, []string{"/var/lib/gridweave/join-node", "--hostname", "a\nExecStartPre=/bin/false", "--serve"}, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "control character") {
		t.Errorf("a newline in an argument: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a unit was written: %v", entries)
	}
}
