package identity

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"gridweave.dev/gridweave"
	"gridweave.dev/gridweave/tlspin"
	"gridweave.dev/internal/randhex"
	"gridweave.dev/mesh/wgkey"
)

// The identity's files in the master's directory, and the keys of the
// shared Secret that hold the same bytes.
const (
	WireGuardKeyFile = "wireguard.key"
	CertFile         = "tls.crt"
	KeyFile          = "tls.key"
)

// Files are the identity's files, in the order Backup and Restore copy
// them.
var Files = []string{WireGuardKeyFile, CertFile, KeyFile}

const (
	// SecretName is the Secret replicas share the identity through.
	SecretName = "gridweave-master"
	// JWTSecretKey is the Secret's key holding the JWT secret.
	JWTSecretKey = "jwt-secret"
)

// Share's refusals, each an error an operator resolves (its message says
// how).
var (
	// ErrSecretMisplaced: the Secret is beside the workloads, not in the
	// system namespace.
	ErrSecretMisplaced = errors.New("identity: the shared Secret is in the workloads' namespace")
	// ErrSecretIncomplete: the Secret lacks a part of the identity.
	ErrSecretIncomplete = errors.New("identity: the shared Secret lacks a part of the identity")
	// ErrFileDiffers: a file of the identity in the master's directory is
	// not the Secret's.
	ErrFileDiffers = errors.New("identity: a file differs from the shared Secret's")
	// ErrJWTSecretDiffers: the configured JWT secret is not the Secret's.
	ErrJWTSecretDiffers = errors.New("identity: the JWT secret differs from the shared Secret's")
)

// refusal is one of Share's refusals: its message says what to do, and it
// is its kind (errors.Is).
type refusal struct {
	kind    error
	message string
}

func (r *refusal) Error() string { return r.message }
func (r *refusal) Unwrap() error { return r.kind }

func refuse(kind error, format string, args ...any) error {
	return &refusal{kind: kind, message: fmt.Sprintf(format, args...)}
}

func orDiscard(log *slog.Logger) *slog.Logger {
	if log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return log
}

// WireGuardKey reads the master's WireGuard private key at path, or makes
// one and keeps it there (0600) for the next start.
func WireGuardKey(path string) (wgkey.PrivateKey, error) {
	raw, err := os.ReadFile(path)
	if err == nil {
		return wgkey.ParsePrivate(string(bytes.TrimRight(raw, "\r\n ")))
	}
	if !errors.Is(err, os.ErrNotExist) {
		return wgkey.PrivateKey{}, err
	}
	key, err := wgkey.GeneratePrivate()
	if err != nil {
		return wgkey.PrivateKey{}, err
	}
	if err := os.WriteFile(path, []byte(key.Base64()+"\n"), 0o600); err != nil {
		return wgkey.PrivateKey{}, err
	}
	return key, nil
}

// PublicTLS is the public listener's TLS configuration: the pair
// cfg.TLSCertFile and cfg.TLSKeyFile name, else the one kept in dir (made
// at first start, self-signed for the master's addresses). It sets
// cfg.PublicPin, which join commands carry. With TLS off it returns nil
// and warns how exposed that is.
func PublicTLS(cfg *gridweave.Config, dir string, log *slog.Logger) (*tls.Config, error) {
	log = orDiscard(log)
	if !cfg.UsesTLS() {
		if !cfg.Dev {
			log.Warn("INSECURE: " + cfg.Name("TLS") + "=off, so the public listener and the join command are plain HTTP: anyone on the path between a machine and this master can replace the agent it runs as root; use this only behind a TLS-terminating proxy the machines trust")
		}
		return nil, nil
	}
	var kp tlspin.KeyPair
	var err error
	if cfg.TLSCertFile != "" {
		if kp, err = tlspin.Load(cfg.TLSCertFile, cfg.TLSKeyFile); err != nil {
			return nil, fmt.Errorf("the public listener's certificate %s: %w", cfg.TLSCertFile, err)
		}
		log.Info("tls: certificate from "+cfg.Name("TLSCertFile"), "cert", cfg.TLSCertFile)
	} else {
		certFile, keyFile := filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile)
		if kp, err = tlspin.LoadOrCreate(certFile, keyFile, addresses(*cfg, false)); err != nil {
			return nil, fmt.Errorf("the public listener's certificate kept in %s: %w", dir, err)
		}
		if kp.Created {
			log.Info("tls: made a self-signed certificate for the public listener; join commands pin its key", "cert", certFile, "key", keyFile)
		}
		if len(kp.Missing) > 0 {
			log.Warn("tls: the kept certificate does not name these addresses (pinned joins still work; clients that check names do not); remove both files to make a new pair, after which earlier join commands stop working", "missing", fmt.Sprint(kp.Missing), "cert", certFile)
		}
	}
	cfg.PublicPin = kp.Pin.String()
	log.Info("tls: public listener serves HTTPS", "pin", cfg.PublicPin)
	return &tls.Config{Certificates: []tls.Certificate{kp.Certificate}, MinVersion: tls.VersionTLS12}, nil
}

// addresses are the addresses a generated certificate names: the master's
// VPN address and its public one, and with hub the hub's address too (a
// replica's pair serves wherever the hub moves).
func addresses(cfg gridweave.Config, hub bool) []netip.Addr {
	addrs := []netip.Addr{cfg.MasterVPNIP}
	others := []string{cfg.MasterIP}
	if hub {
		others = append(others, cfg.HubIP)
	}
	for _, a := range others {
		if ip, err := netip.ParseAddr(a); err == nil {
			addrs = append(addrs, ip)
		}
	}
	return addrs
}

// Share makes sure the shared Secret exists in cfg.SystemNamespace and
// writes its WireGuard key, and its TLS pair when the master makes its
// own, into dir; it returns its JWT secret. The first replica makes it,
// from the files in dir when they exist; a replica that lost that race
// takes the winner's. A different identity already in dir is never
// overwritten: which one the fleet keeps is the operator's choice
// (ErrFileDiffers, ErrJWTSecretDiffers). A nil log discards.
func Share(ctx context.Context, kube kubernetes.Interface, cfg gridweave.Config, dir string, log *slog.Logger) (string, error) {
	log = orDiscard(log)
	secrets := kube.CoreV1().Secrets(cfg.SystemNamespace)
	s, err := secrets.Get(ctx, SecretName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		// Servers before the system namespace kept it beside the
		// workloads: a new identity here would strand every joined machine.
		if _, oldErr := kube.CoreV1().Secrets(cfg.Namespace).Get(ctx, SecretName, metav1.GetOptions{}); oldErr == nil {
			return "", refuse(ErrSecretMisplaced, "the Secret %s/%s holds this master's identity, where the workloads' editors read it: move it to %s before starting (kubectl -n %s get secret %s -o yaml | sed 's/namespace: %s/namespace: %s/' | kubectl apply -f - && kubectl -n %s delete secret %s)",
				cfg.Namespace, SecretName, cfg.SystemNamespace, cfg.Namespace, SecretName, cfg.Namespace, cfg.SystemNamespace, cfg.Namespace, SecretName)
		}
		made, fresh, makeErr := newSecret(cfg, dir)
		var refused *gridweave.SettingError
		if errors.As(makeErr, &refused) {
			removeAll(fresh)
			return "", refused
		}
		if makeErr == nil {
			s, err = secrets.Create(ctx, made, metav1.CreateOptions{FieldManager: "gridweave"})
		} else {
			err = makeErr
		}
		if err == nil {
			log.Info("made the Secret every replica shares: the master's WireGuard key, TLS pair and JWT secret", "secret", SecretName)
		} else {
			// Not ours (another replica made it first) or not made: the
			// files made here for it go, so that the stored Secret's
			// are the ones written below, now or at the next start.
			removeAll(fresh)
		}
		if apierrors.IsAlreadyExists(err) {
			s, err = secrets.Get(ctx, SecretName, metav1.GetOptions{})
		}
	}
	if err != nil {
		return "", fmt.Errorf("the Secret %s/%s: %w", cfg.SystemNamespace, SecretName, err)
	}
	names := []string{WireGuardKeyFile}
	if ownsCertificate(cfg) {
		names = append(names, CertFile, KeyFile)
	}
	for _, name := range names {
		data, ok := s.Data[name]
		if !ok {
			return "", refuse(ErrSecretIncomplete, "the Secret %s/%s has no %s: every replica must serve the same one; add it (kubectl -n %s edit secret %s) or delete the Secret so that the first replica makes it again (joined nodes then need new join commands)", cfg.SystemNamespace, SecretName, name, cfg.SystemNamespace, SecretName)
		}
		path := filepath.Join(dir, name)
		if old, err := os.ReadFile(path); err == nil && !bytes.Equal(bytes.TrimSpace(old), bytes.TrimSpace(data)) {
			return "", refuse(ErrFileDiffers, "%s beside the ledger differs from the one in the Secret %s/%s: move it away to take the Secret's (nodes joined with the file's then need new join commands), or migrate this master's ledger and identity with gridweave-server migrate", path, cfg.SystemNamespace, SecretName)
		}
		if err := writePrivate(path, data); err != nil {
			return "", err
		}
	}
	jwt := string(s.Data[JWTSecretKey])
	if len(jwt) == 0 {
		return "", refuse(ErrSecretIncomplete, "the Secret %s/%s has no %s", cfg.SystemNamespace, SecretName, JWTSecretKey)
	}
	if cfg.JWTSecret != "" && cfg.JWTSecret != gridweave.DefaultJWTSecret && cfg.JWTSecret != jwt {
		return "", refuse(ErrJWTSecretDiffers, "%s differs from the Secret %s/%s's %s: every replica must verify with the same one; unset %[1]s to use the Secret's", cfg.Name("JWTSecret"), cfg.SystemNamespace, SecretName, JWTSecretKey)
	}
	return jwt, nil
}

// ownsCertificate is whether the master makes its public listener's pair
// (TLS on, and no certificate given).
func ownsCertificate(cfg gridweave.Config) bool { return cfg.UsesTLS() && cfg.TLSCertFile == "" }

// newSecret is the shared Secret from the files in dir, each made when
// missing (fresh lists those), and a new JWT secret unless cfg set one.
func newSecret(cfg gridweave.Config, dir string) (_ *corev1.Secret, fresh []string, _ error) {
	for _, name := range Files {
		if _, err := os.Stat(filepath.Join(dir, name)); errors.Is(err, os.ErrNotExist) {
			fresh = append(fresh, filepath.Join(dir, name))
		}
	}
	data := map[string][]byte{}
	key, err := WireGuardKey(filepath.Join(dir, WireGuardKeyFile))
	if err != nil {
		return nil, fresh, err
	}
	data[WireGuardKeyFile] = []byte(key.Base64() + "\n")
	if ownsCertificate(cfg) {
		certFile, keyFile := filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile)
		if _, err := tlspin.LoadOrCreate(certFile, keyFile, addresses(cfg, true)); err != nil {
			return nil, fresh, err
		}
		for name, path := range map[string]string{CertFile: certFile, KeyFile: keyFile} {
			if data[name], err = os.ReadFile(path); err != nil {
				return nil, fresh, err
			}
		}
	}
	jwt := cfg.JWTSecret
	if jwt == "" || jwt == gridweave.DefaultJWTSecret {
		jwt = randhex.String(32)
	} else if err := cfg.CheckJWTSecret(); err != nil {
		// Never stored before it passed: the Secret outlives this start.
		return nil, fresh, err
	}
	data[JWTSecretKey] = []byte(jwt)
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: SecretName, Labels: map[string]string{"app.kubernetes.io/part-of": "gridweave"}},
		Type:       corev1.SecretTypeOpaque,
		Data:       data,
	}, fresh, nil
}

func removeAll(paths []string) {
	for _, path := range paths {
		_ = os.Remove(path)
	}
}

// writePrivate replaces path with data, readable by its owner only.
func writePrivate(path string, data []byte) error {
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
