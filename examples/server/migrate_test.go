package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"gridweave.dev/gridweave/identity"
	"gridweave.dev/joinkeys"
	"gridweave.dev/joinkeys/kubestore"
	"gridweave.dev/joinkeys/sqlitestore"
	"gridweave.dev/joinkeys/storetest"
	"gridweave.dev/mesh/wgkey"
)

// TestMigrateBothWays copies a SQLite ledger (keys of both kinds, used
// and revoked; nodes validated, registered with GPUs and a pod CIDR, and
// disconnected; the audit trail) into Kubernetes, checks the copy and the
// master's identity in the shared Secret, refuses to copy onto it again,
// and copies it back into a new SQLite file, which equals the first.
func TestMigrateBothWays(t *testing.T) {
	if testing.Short() {
		t.Skip("real control plane; run make test")
	}
	tc, ns := haLedger(t, "migrate")
	ctx := context.Background()
	dir := t.TempDir()
	db := filepath.Join(dir, "kuberay.db")
	src, err := sqlitestore.Open(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	secret := []byte("migrate-secret-0123456789abcdef0123456789")
	kr, err := joinkeys.New(src, &joinkeys.Options{JWTSecret: secret, Pool: joinkeys.MustPool("10.100.0.0/16", "10.100.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	org, err := kr.Mint(ctx, joinkeys.MintRequest{Kind: joinkeys.KindOrg, Org: "acme", TTL: time.Hour, MaxUses: 9, Labels: map[string]string{"team": "ml"}, CreatedBy: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	provider, err := kr.Mint(ctx, joinkeys.MintRequest{Kind: joinkeys.KindProvider, Org: "acme", Provider: "gpu-cloud", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var tokens []string
	for i := range 5 {
		_, pub, _ := wgkey.GeneratePair()
		j, err := kr.Join(ctx, joinkeys.JoinRequest{Key: org.Secret, Hostname: fmt.Sprintf("gpu-%d", i), PublicKey: pub.String(), Version: "1.4.0"})
		if err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, j.NodeToken)
	}
	if _, err := kr.Register(ctx, joinkeys.Registration{NodeToken: tokens[1], Hostname: "gpu-1", GPUs: []joinkeys.GPU{{Index: 0, Vendor: "nvidia", Name: "NVIDIA H100 80GB HBM3", MemoryMiB: 81559, UUID: "GPU-1"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := kr.SetNodePodCIDR(ctx, "gpu-1", netip.MustParsePrefix("10.42.1.0/24")); err != nil {
		t.Fatal(err)
	}
	if _, err := kr.MarkDisconnected(ctx, "gpu-2", "admin"); err != nil {
		t.Fatal(err)
	}
	if _, err := kr.Release(ctx, "gpu-3", "admin"); err != nil {
		t.Fatal(err)
	}
	if _, err := kr.Revoke(ctx, provider.ID, "admin"); err != nil {
		t.Fatal(err)
	}
	before, err := joinkeys.Export(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	src.Close()
	wgKey := filepath.Join(dir, "wireguard.key")
	if _, err := identity.WireGuardKey(wgKey); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"KUBERAY_DB": db, "KUBECONFIG": tc.KubeconfigPath, "KUBERAY_NAMESPACE": ns, "GRIDWEAVE_SYSTEM_NAMESPACE": systemNamespace(ns), "JWT_SECRET": string(secret)}
	var out, errOut bytes.Buffer
	if err := run(ctx, []string{"migrate", "--from", "sqlite", "--to", "kubernetes"}, func(k string) string { return env[k] }, &out, &errOut); err != nil {
		t.Fatalf("migrate to kubernetes: %v\n%s", err, errOut.String())
	}
	if !strings.Contains(out.String(), "copied 2 keys, 4 nodes and ") {
		t.Errorf("output: %s", out.String())
	}
	ks, err := kubestore.New(tc.Config, ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	copied, err := joinkeys.Export(ctx, ks)
	if err != nil {
		t.Fatal(err)
	}
	if err := joinkeys.SameLedger(before, copied); err != nil {
		t.Fatalf("the ledger in Kubernetes: %v", err)
	}
	// The copy works: a node token authenticates, the key spends its
	// uses, a new machine gets a free address.
	krk, err := joinkeys.New(ks, &joinkeys.Options{JWTSecret: secret, Pool: joinkeys.MustPool("10.100.0.0/16", "10.100.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := krk.AuthenticateNode(ctx, "gpu-0", tokens[0]); err != nil {
		t.Errorf("a node token after the move: %v", err)
	}
	if _, err := krk.Check(ctx, provider.Secret); !errors.Is(err, joinkeys.ErrKeyRevoked) {
		t.Errorf("the revoked key after the move: %v", err)
	}
	// The master's WireGuard key and JWT secret are in the shared Secret.
	s, err := tc.Kube.CoreV1().Secrets(systemNamespace(ns)).Get(ctx, identity.SecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kept, _ := os.ReadFile(wgKey)
	if !bytes.Equal(bytes.TrimSpace(s.Data[identity.WireGuardKeyFile]), bytes.TrimSpace(kept)) || string(s.Data[identity.JWTSecretKey]) != string(secret) {
		t.Error("the Secret does not carry the master's WireGuard key and JWT secret")
	}
	// Onto a ledger that is not empty: refused, nothing written.
	out.Reset()
	if err := run(ctx, []string{"migrate", "--from", "sqlite", "--to", "kubernetes"}, func(k string) string { return env[k] }, &out, &errOut); !errors.Is(err, joinkeys.ErrNotEmpty) {
		t.Errorf("a second migrate onto the copy: %v, want ErrNotEmpty", err)
	}
	if again, _ := joinkeys.Export(ctx, ks); joinkeys.SameLedger(before, again) != nil {
		t.Error("the refused migrate changed the ledger")
	}
	j, err := krk.Join(ctx, joinkeys.JoinRequest{Key: org.Secret, Hostname: "gpu-9", PublicKey: storetest.PublicKey(t)})
	if err != nil {
		t.Fatal(err)
	}
	if j.Node.VPNIP.String() != "10.100.0.5" { // gpu-3's, released before the move
		t.Errorf("a new machine after the move got %s, want the free 10.100.0.5", j.Node.VPNIP)
	}
	if _, err := krk.Release(ctx, "gpu-9", "admin"); err != nil {
		t.Fatal(err)
	}
	afterJoin, err := joinkeys.Export(ctx, ks)
	if err != nil {
		t.Fatal(err)
	}

	// And back, into a new file.
	back := filepath.Join(t.TempDir(), "back", "kuberay.db")
	envBack := map[string]string{"KUBERAY_DB": back, "KUBECONFIG": tc.KubeconfigPath, "KUBERAY_NAMESPACE": ns, "GRIDWEAVE_SYSTEM_NAMESPACE": systemNamespace(ns)}
	out.Reset()
	if err := run(ctx, []string{"migrate", "--from", "kubernetes", "--to", "sqlite"}, func(k string) string { return envBack[k] }, &out, &errOut); err != nil {
		t.Fatalf("migrate back: %v\n%s", err, errOut.String())
	}
	sq, err := sqlitestore.Open(ctx, back, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sq.Close()
	returned, err := joinkeys.Export(ctx, sq)
	if err != nil {
		t.Fatal(err)
	}
	if err := joinkeys.SameLedger(afterJoin, returned); err != nil {
		t.Fatalf("the ledger back in SQLite: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(filepath.Dir(back), "wireguard.key")); !bytes.Equal(bytes.TrimSpace(got), bytes.TrimSpace(kept)) {
		t.Error("the master's WireGuard key did not come back beside the new ledger")
	}
	if err := run(ctx, []string{"migrate", "--from", "sqlite", "--to", "sqlite"}, func(k string) string { return envBack[k] }, &out, &errOut); err == nil || !strings.Contains(err.Error(), "--from sqlite --to kubernetes") {
		t.Errorf("migrate sqlite to sqlite: %v", err)
	}

	// A replica never overwrites an identity that differs from the
	// Secret's: another WireGuard key beside its ledger, or another
	// JWT_SECRET, stops its start.
	other := t.TempDir()
	if _, err := identity.WireGuardKey(filepath.Join(other, "wireguard.key")); err != nil {
		t.Fatal(err)
	}
	// Refused at start; bounded in case a start got through.
	startCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	replicaEnv := map[string]string{"KUBERAY_STORE": "kubernetes", "KUBERAY_DB": filepath.Join(other, "kuberay.db"), "KUBECONFIG": tc.KubeconfigPath,
		"KUBERAY_NAMESPACE": ns, "GRIDWEAVE_SYSTEM_NAMESPACE": systemNamespace(ns), "ADMIN_TOKEN": strings.Repeat("a", 32), "WG_INTERFACE": "none", "REPLICA_ADDR": freeAddr(t)}
	if err := run(startCtx, nil, func(k string) string { return replicaEnv[k] }, &out, &errOut); err == nil || !strings.Contains(err.Error(), "differs from the one in the Secret") {
		t.Errorf("a replica with another WireGuard key: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(other, "wireguard.key")); bytes.Equal(bytes.TrimSpace(got), bytes.TrimSpace(kept)) {
		t.Error("the replica overwrote its own WireGuard key with the Secret's")
	}
	replicaEnv["KUBERAY_DB"] = filepath.Join(t.TempDir(), "kuberay.db")
	replicaEnv["JWT_SECRET"] = strings.Repeat("x", 40)
	if err := run(startCtx, nil, func(k string) string { return replicaEnv[k] }, &out, &errOut); err == nil || !strings.Contains(err.Error(), "JWT_SECRET differs") {
		t.Errorf("a replica with another JWT_SECRET: %v", err)
	}
}

// A replica started with a JWT_SECRET the configuration check refuses
// stops before it makes the shared Secret: nothing of the unsafe secret
// is stored for the next start to take.
func TestAnUnsafeJWTSecretIsNeverStored(t *testing.T) {
	if testing.Short() {
		t.Skip("real control plane; run make test")
	}
	tc, ns := haLedger(t, "unsafe")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, secret := range []string{"short", "change-me-change-me-change-me-change-me"} {
		env := map[string]string{"KUBERAY_STORE": "kubernetes", "KUBERAY_DB": filepath.Join(t.TempDir(), "kuberay.db"), "KUBECONFIG": tc.KubeconfigPath,
			"KUBERAY_NAMESPACE": ns, "GRIDWEAVE_SYSTEM_NAMESPACE": systemNamespace(ns), "ADMIN_TOKEN": strings.Repeat("a", 32), "WG_INTERFACE": "none", "REPLICA_ADDR": freeAddr(t),
			"JWT_SECRET": secret}
		var out, errOut bytes.Buffer
		if err := run(ctx, nil, func(k string) string { return env[k] }, &out, &errOut); err == nil || !strings.HasPrefix(err.Error(), "JWT_SECRET:") {
			t.Errorf("a replica with JWT_SECRET=%q: %v", secret, err)
		}
		if _, err := tc.Kube.CoreV1().Secrets(systemNamespace(ns)).Get(ctx, identity.SecretName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("after a start with JWT_SECRET=%q the Secret exists (or: %v)", secret, err)
		}
	}
}
