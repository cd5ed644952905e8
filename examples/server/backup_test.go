package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gridweave.dev/gridweave/tlspin"
)

// TestBackupWhileServingAndRestore: `server backup --to` copies the ledger
// of a running server (it keeps answering); `server restore --from` puts
// it back under a new KUBERAY_DB, and a server started on it has every
// key that was minted.
func TestBackupWhileServingAndRestore(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"KUBERAY_DB": filepath.Join(dir, "data", "kuberay.db"), "KUBECONFIG": "", "WG_INTERFACE": "none",
		"ADMIN_TOKEN": "backup-test-admin-token-0123456789", "JWT_SECRET": strings.Repeat("j", 40)}
	s := start(t, env)
	var ids []string
	for range 5 {
		status, body := post(t, s.url+"/v1/nodes/join-keys", env["ADMIN_TOKEN"], map[string]any{"kind": "org", "org": "acme", "ttl_seconds": 3600})
		if status != 201 {
			t.Fatalf("mint: %d %v", status, body)
		}
		ids = append(ids, body["id"].(string))
	}
	getenv := func(k string) string { return env[k] }
	backup := filepath.Join(dir, "ledger.backup")
	var out strings.Builder
	if err := run(context.Background(), []string{"backup", "--to", backup}, getenv, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if status, _ := post(t, s.url+"/v1/nodes/join-keys", env["ADMIN_TOKEN"], map[string]any{"kind": "org", "org": "acme", "ttl_seconds": 3600}); status != 201 {
		t.Errorf("the server after a backup: %d", status)
	}
	if err := run(context.Background(), []string{"backup"}, getenv, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "--to FILE") {
		t.Errorf("backup without --to: %v", err)
	}

	restoredEnv := map[string]string{}
	for k, v := range env {
		restoredEnv[k] = v
	}
	restoredEnv["KUBERAY_DB"] = filepath.Join(dir, "restored", "kuberay.db")
	if err := run(context.Background(), []string{"restore", "--from", backup}, func(k string) string { return restoredEnv[k] }, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	r := start(t, restoredEnv)
	status, list := get(t, r.url+"/v1/nodes/join-keys", env["ADMIN_TOKEN"])
	if status != 200 {
		t.Fatalf("list keys on the restored server: %d", status)
	}
	for _, id := range ids {
		if !strings.Contains(list, id) {
			t.Errorf("key %s is missing after restore: %s", id, list)
		}
	}
	// The master's identity travels with the backup: the restored server
	// serves the same certificate (join commands handed out before still
	// pin it) and the same WireGuard key (every node's tunnel names it).
	if r.pin != s.pin || s.pin == (tlspin.Pin{}) {
		t.Errorf("the restored server's pin %s, the original's %s", r.pin, s.pin)
	}
	for _, name := range []string{"wireguard.key", "tls.key"} {
		before, _ := os.ReadFile(filepath.Join(dir, "data", name))
		after, err := os.ReadFile(filepath.Join(dir, "restored", name))
		if err != nil || len(before) == 0 || string(before) != string(after) {
			t.Errorf("%s after restore: %v (same as before: %v)", name, err, string(before) == string(after))
		}
		if fi, err := os.Stat(backup + "." + name); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("the backup of %s: %v %v", name, fi, err)
		}
	}
}

// TestCertificateSurvivesARestart: the pair made at first start is kept
// (the key 0600) and served again after a restart, so the pin in the
// join commands handed out stays good; TLS=off serves plain HTTP and
// says how exposed that is.
func TestCertificateSurvivesARestart(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"KUBERAY_DB": filepath.Join(dir, "kuberay.db"), "KUBECONFIG": "", "WG_INTERFACE": "none", "MASTER_IP": "198.18.0.9",
		"ADMIN_TOKEN": "restart-test-admin-token-0123456789", "JWT_SECRET": strings.Repeat("j", 40)}
	first := start(t, env)
	if !strings.HasPrefix(first.url, "https://") || !strings.Contains(first.stderr.String(), first.pin.String()) {
		t.Fatalf("the first start: %s, log\n%s", first.url, first.stderr)
	}
	status, minted := post(t, first.url+"/v1/nodes/join-keys", env["ADMIN_TOKEN"], map[string]any{"kind": "org", "org": "acme", "ttl_seconds": 600})
	if status != 201 || !strings.Contains(minted["join_command"].(string), "--pinnedpubkey "+first.pin.String()+" -k https://198.18.0.9:8800/join-node.sh") {
		t.Fatalf("mint: %d %v", status, minted)
	}
	if fi, err := os.Stat(filepath.Join(dir, "tls.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the kept key: %v %v", fi, err)
	}
	first.stop()
	<-first.done
	first.done <- nil
	second := start(t, env)
	if second.pin != first.pin {
		t.Fatalf("the pin changed across a restart: %s, then %s", first.pin, second.pin)
	}

	plain := map[string]string{"TLS": "off", "KUBERAY_DB": filepath.Join(t.TempDir(), "kuberay.db")}
	for k, v := range env {
		if plain[k] == "" {
			plain[k] = v
		}
	}
	off := start(t, plain)
	if !strings.HasPrefix(off.url, "http://") || !strings.Contains(off.stderr.String(), "INSECURE: TLS=off") {
		t.Fatalf("TLS=off: %s, log\n%s", off.url, off.stderr)
	}
	status, minted = post(t, off.url+"/v1/nodes/join-keys", env["ADMIN_TOKEN"], map[string]any{"kind": "org", "org": "acme", "ttl_seconds": 600})
	if status != 201 || !strings.HasPrefix(minted["join_command"].(string), `d=$(mktemp -d) && curl -fsSL http://198.18.0.9:8800/join-node.sh -o "$d/join-node.sh" && sudo MASTER_IP=198.18.0.9 bash "$d/join-node.sh" gwk_`) {
		t.Fatalf("mint with TLS=off: %d %v", status, minted)
	}
}

// get fetches url as the bearer of token; it returns the status and body.
func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := clientFor(url).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}
