package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"

	"gridweave.dev/gridweave"
	"gridweave.dev/joinkeys"
	"gridweave.dev/joinkeys/kubestore"
	"gridweave.dev/joinkeys/sqlitestore"
)

// migrate is `server migrate --from sqlite --to kubernetes` (or the other
// way): it copies the ledger (keys, nodes, node tokens and key secrets as
// their hashes, the audit trail) from KUBERAY_DB to KUBERAY_NAMESPACE of
// the cluster KUBECONFIG (or the pod) names, or back, reads the copy back
// and compares it. The target must be empty. The master's identity moves
// with it: to Kubernetes, the WireGuard key and TLS pair beside KUBERAY_DB
// (and JWT_SECRET) become the Secret the replicas share, unless it exists;
// back to SQLite, the Secret's files are written beside KUBERAY_DB. Stop
// the servers on the source first.
func migrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	flags := flag.NewFlagSet("server migrate", flag.ContinueOnError)
	flags.SetOutput(stderr)
	from := flags.String("from", "", "the ledger to copy: sqlite (KUBERAY_DB) or kubernetes (KUBERAY_NAMESPACE)")
	to := flags.String("to", "", "where to copy it: kubernetes or sqlite; it must be empty")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if (*from != "sqlite" || *to != "kubernetes") && (*from != "kubernetes" || *to != "sqlite") {
		return fmt.Errorf("server migrate: --from sqlite --to kubernetes, or --from kubernetes --to sqlite (got --from %q --to %q)", *from, *to)
	}
	cfg, err := gridweave.ConfigFromEnv(getenv)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	rc, err := restConfig(getenv, log)
	if err != nil {
		return err
	}
	if rc == nil {
		return errors.New("server migrate: no Kubernetes API server (set KUBECONFIG, or run in a pod)")
	}
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	ks, err := kubestore.New(rc, cfg.Namespace, nil)
	if err != nil {
		return fmt.Errorf("KUBERAY_NAMESPACE: %w", err)
	}
	defer ks.Close()
	if _, err := ks.Keys(ctx); apierrors.IsNotFound(err) && *to == "kubernetes" {
		if err := kubestore.InstallCRDs(ctx, rc); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "installed the ledger's CRDs (group %s)\n", kubestore.Group)
	} else if err != nil {
		return fmt.Errorf("the ledger in namespace %s: %w", cfg.Namespace, err)
	}
	dir := filepath.Dir(cfg.DBPath)
	if *to == "sqlite" {
		if _, err := os.Stat(cfg.DBPath); err == nil {
			return fmt.Errorf("server migrate: KUBERAY_DB %s exists; the target must be a new file", cfg.DBPath)
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
	} else if _, err := os.Stat(cfg.DBPath); err != nil {
		return fmt.Errorf("server migrate: KUBERAY_DB: %w", err)
	}
	sq, err := sqlitestore.Open(ctx, cfg.DBPath, nil)
	if err != nil {
		return fmt.Errorf("KUBERAY_DB: %w", err)
	}
	defer sq.Close()
	var source joinkeys.Store = sq
	var target joinkeys.Importer = ks
	where := fmt.Sprintf("SQLite %s to Kubernetes namespace %s", cfg.DBPath, cfg.Namespace)
	if *from == "kubernetes" {
		source, target = ks, sq
		where = fmt.Sprintf("Kubernetes namespace %s to SQLite %s", cfg.Namespace, cfg.DBPath)
	}
	copied, err := joinkeys.Migrate(ctx, source, target)
	if err != nil {
		return fmt.Errorf("server migrate: %w", err)
	}
	fmt.Fprintf(stdout, "copied %d keys, %d nodes and %d audit events from %s; read back and verified\n", len(copied.Keys), len(copied.Nodes), len(copied.Audit), where)
	if _, err := shareMasterSecret(ctx, kube, cfg, dir, log); err != nil {
		return err
	}
	if *to == "kubernetes" {
		fmt.Fprintf(stdout, "the master's WireGuard key, TLS pair and JWT secret are in the Secret %s/%s: start the replicas with KUBERAY_STORE=kubernetes\n", cfg.SystemNamespace, masterSecret)
	} else {
		fmt.Fprintf(stdout, "the master's WireGuard key and TLS pair are beside %s, and JWT_SECRET must be the Secret %s/%s's %s: start the server with KUBERAY_STORE=sqlite\n", cfg.DBPath, cfg.SystemNamespace, masterSecret, secretJWT)
	}
	return nil
}
