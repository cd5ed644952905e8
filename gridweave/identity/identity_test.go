package identity

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"gridweave.dev/gridweave"
)

var quiet = slog.New(slog.DiscardHandler)

func TestWireGuardKeyIsKept(t *testing.T) {
	path := filepath.Join(t.TempDir(), WireGuardKeyFile)
	first, err := WireGuardKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the key file: %v %v", fi, err)
	}
	again, err := WireGuardKey(path)
	if err != nil || again != first {
		t.Fatalf("the second read made another key (%v)", err)
	}
	if err := os.WriteFile(path, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := WireGuardKey(path); err == nil {
		t.Error("a damaged key file was accepted")
	}
}

func testConfig() gridweave.Config {
	return gridweave.Config{Namespace: "work", SystemNamespace: "system", MasterVPNIP: netip.MustParseAddr("10.100.0.1"), MasterIP: "198.18.0.9", JWTSecret: gridweave.DefaultJWTSecret}
}

// TestShare: the first replica makes the Secret from its files (kept as
// they were), a second one writes the same files and takes the same JWT
// secret, and what differs from the Secret is refused, never replaced.
func TestShare(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset()
	cfg := testConfig()
	first := t.TempDir()
	key, err := WireGuardKey(filepath.Join(first, WireGuardKeyFile)) // a single master's, made HA
	if err != nil {
		t.Fatal(err)
	}
	jwt, err := Share(ctx, kube, cfg, first, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if len(jwt) < 32 {
		t.Fatalf("the made JWT secret %q is short", jwt)
	}
	if again, err := WireGuardKey(filepath.Join(first, WireGuardKeyFile)); err != nil || again != key {
		t.Fatal("the single master's WireGuard key was replaced")
	}
	second := t.TempDir()
	if got, err := Share(ctx, kube, cfg, second, quiet); err != nil || got != jwt {
		t.Fatalf("the second replica: %q, %v; want the first's secret", got, err)
	}
	for _, name := range Files {
		a, _ := os.ReadFile(filepath.Join(first, name))
		b, err := os.ReadFile(filepath.Join(second, name))
		if err != nil || !bytes.Equal(a, b) || len(a) == 0 {
			t.Errorf("%s differs between the replicas (%v)", name, err)
		}
	}

	other := t.TempDir()
	if _, err := WireGuardKey(filepath.Join(other, WireGuardKeyFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := Share(ctx, kube, cfg, other, quiet); !errors.Is(err, ErrFileDiffers) || !strings.Contains(err.Error(), "differs from the one in the Secret") {
		t.Errorf("a different key beside the ledger: %v", err)
	}
	set := cfg
	set.JWTSecret = strings.Repeat("x", 40)
	if _, err := Share(ctx, kube, set, t.TempDir(), quiet); !errors.Is(err, ErrJWTSecretDiffers) {
		t.Errorf("a different JWT secret: %v", err)
	}
}

// TestShareRefuses: a Secret left beside the workloads stops the start
// (a new identity would strand every joined machine), and a JWT secret
// that fails the checks is never stored, nor are the files made for it
// kept.
func TestShareRefuses(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig()
	old := fake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: SecretName, Namespace: cfg.Namespace}})
	if _, err := Share(ctx, old, cfg, t.TempDir(), nil); !errors.Is(err, ErrSecretMisplaced) || !strings.Contains(err.Error(), "move it to system") {
		t.Errorf("the Secret in the workloads' namespace: %v", err)
	}
	kube := fake.NewClientset()
	weak := cfg
	weak.JWTSecret = "short"
	dir := t.TempDir()
	if _, err := Share(ctx, kube, weak, dir, quiet); err == nil {
		t.Fatal("a short JWT secret was stored")
	}
	if _, err := kube.CoreV1().Secrets("system").Get(ctx, SecretName, metav1.GetOptions{}); err == nil {
		t.Error("the Secret was made with a refused JWT secret")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("files made for a refused Secret were kept: %v", entries)
	}
}
