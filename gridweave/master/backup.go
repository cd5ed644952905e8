package master

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"gridweave.dev/gridweave"
	"gridweave.dev/gridweave/identity"
	"gridweave.dev/joinkeys"
	"gridweave.dev/joinkeys/kubestore"
	"gridweave.dev/joinkeys/sqlitestore"
)

// A Copy is one file Backup or Restore copied.
type Copy struct{ From, To string }

// Backup copies the SQLite ledger cfg.DBPath to the new file to (online,
// while the master runs: SQLite's backup API) and the identity's files
// beside it to to.NAME (0600). Nothing is written when any target
// exists. It returns the copies made, the ledger's first.
func Backup(ctx context.Context, cfg gridweave.Config, to string) ([]Copy, error) {
	for _, name := range identity.Files { // refused before anything is written
		if _, err := os.Stat(to + "." + name); err == nil {
			return nil, fmt.Errorf("backup: %s exists; choose a new target", to+"."+name)
		}
	}
	if err := sqlitestore.Backup(ctx, cfg.DBPath, to); err != nil {
		return nil, err
	}
	copies := []Copy{{cfg.DBPath, to}}
	for _, name := range identity.Files {
		c := Copy{filepath.Join(Dir(cfg), name), to + "." + name}
		if copied, err := copyKeyFile(c.From, c.To, true); err != nil {
			return copies, err
		} else if copied {
			copies = append(copies, c)
		}
	}
	return copies, nil
}

// Restore puts a backup made by Backup in place: the ledger from from and
// the identity's files from from.NAME, each replaced whole; a file the
// backup does not hold is kept as it is (made at start when missing).
// Stop the master first. It returns the copies made, the ledger's last;
// the identity's files it does not name were not in the backup.
func Restore(ctx context.Context, cfg gridweave.Config, from string) ([]Copy, error) {
	if err := sqlitestore.Restore(ctx, from, cfg.DBPath); err != nil {
		return nil, err
	}
	var copies []Copy
	for _, name := range identity.Files {
		c := Copy{from + "." + name, filepath.Join(Dir(cfg), name)}
		if copied, err := copyKeyFile(c.From, c.To, false); err != nil {
			return copies, err
		} else if copied {
			copies = append(copies, c)
		}
	}
	return append(copies, Copy{from, cfg.DBPath}), nil
}

// copyKeyFile copies a key file (0600) when from exists; exclusive
// refuses a to that exists (a backup never overwrites), else to is
// replaced whole.
func copyKeyFile(from, to string, exclusive bool) (copied bool, _ error) {
	data, err := os.ReadFile(from)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if exclusive {
		f, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return false, err
		}
		if _, err := f.Write(data); err != nil {
			f.Close()
			return false, err
		}
		return true, f.Close()
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
		return false, err
	}
	tmp := to + ".restoring"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return false, err
	}
	return true, os.Rename(tmp, to)
}

// Migrated is what Migrate copied, and from where to where.
type Migrated struct {
	joinkeys.Ledger
	// Where says from which ledger to which, for a report.
	Where string
	// Secret is the namespaced name of the identity's shared Secret.
	Secret string
	// InstalledCRDs is set when the ledger's CRDs were installed first.
	InstalledCRDs bool
}

// Migrate copies the ledger (keys, nodes, node tokens and key secrets as
// their hashes, the audit trail) from the SQLite file cfg.DBPath to the
// Kubernetes ledger in cfg.Namespace of the cluster rc reaches (toKube),
// or back, reads the copy back and compares it; the target must be empty
// (the ledger's CRDs are installed when missing). The master's identity
// moves with it: to Kubernetes, the WireGuard key and TLS pair in the
// master's directory (and cfg.JWTSecret) become the Secret the replicas
// share, unless it exists; back to SQLite, the Secret's files are written
// into the master's directory. Stop the masters on the source first. An
// error after the copy (the identity refused) comes with what was copied.
func Migrate(ctx context.Context, cfg gridweave.Config, rc *rest.Config, toKube bool, log *slog.Logger) (Migrated, error) {
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return Migrated{}, err
	}
	ks, err := kubestore.New(rc, cfg.Namespace, nil)
	if err != nil {
		return Migrated{}, fmt.Errorf("the Kubernetes ledger's namespace: %w", err)
	}
	defer ks.Close()
	installed := false
	if _, err := ks.Keys(ctx); apierrors.IsNotFound(err) && toKube {
		if err := kubestore.InstallCRDs(ctx, rc); err != nil {
			return Migrated{}, err
		}
		installed = true
	} else if err != nil {
		return Migrated{}, fmt.Errorf("the ledger in namespace %s: %w", cfg.Namespace, err)
	}
	dir := Dir(cfg)
	if !toKube {
		if _, err := os.Stat(cfg.DBPath); err == nil {
			return Migrated{}, fmt.Errorf("migrate: the SQLite ledger %s exists; the target must be a new file", cfg.DBPath)
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return Migrated{}, err
		}
	} else if _, err := os.Stat(cfg.DBPath); err != nil {
		return Migrated{}, fmt.Errorf("migrate: the SQLite ledger: %w", err)
	}
	sq, err := sqlitestore.Open(ctx, cfg.DBPath, nil)
	if err != nil {
		return Migrated{}, fmt.Errorf("the SQLite ledger: %w", err)
	}
	defer sq.Close()
	var source joinkeys.Store = sq
	var target joinkeys.Importer = ks
	m := Migrated{Where: fmt.Sprintf("SQLite %s to Kubernetes namespace %s", cfg.DBPath, cfg.Namespace), Secret: cfg.SystemNamespace + "/" + identity.SecretName, InstalledCRDs: installed}
	if !toKube {
		source, target = ks, sq
		m.Where = fmt.Sprintf("Kubernetes namespace %s to SQLite %s", cfg.Namespace, cfg.DBPath)
	}
	if m.Ledger, err = joinkeys.Migrate(ctx, source, target); err != nil {
		return Migrated{InstalledCRDs: installed}, fmt.Errorf("migrate: %w", err)
	}
	// The ledger is copied (m says what) even when the identity is
	// refused below.
	_, err = identity.Share(ctx, kube, cfg, dir, log)
	return m, err
}
