package main

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// TestBackupWhileServingAndRestore: `server backup --to` copies the ledger
// of a running server (it keeps answering); `server restore --from` puts
// it back under a new KUBERAY_DB, and a server started on it has every
// key that was minted.
func TestBackupWhileServingAndRestore(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"KUBERAY_DB": filepath.Join(dir, "data", "kuberay.db"), "KUBECONFIG": "", "WG_INTERFACE": "gwtest-none0",
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
}

// get fetches url as the bearer of token; it returns the status and body.
func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}
