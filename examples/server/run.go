package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"gridweave.dev/examples/server/serverenv"
	"gridweave.dev/gridweave"
	"gridweave.dev/gridweave/identity"
	"gridweave.dev/gridweave/master"
	"gridweave.dev/internal/randhex"
	"gridweave.dev/joinkeys/kubestore"
)

// builtVersion is the version a release build stamps in (make
// server-static: -X main.builtVersion=...); SERVER_VERSION overrides it.
var builtVersion = ""

// run is the whole program; main only gives it the process's context,
// arguments, environment and output, so tests run it in-process.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "backup", "restore":
			return backupOrRestore(ctx, args[0], args[1:], getenv, stdout, stderr)
		case "migrate":
			return migrate(ctx, args[1:], getenv, stdout, stderr)
		}
	}
	flags := flag.NewFlagSet("server", flag.ContinueOnError)
	flags.SetOutput(stderr)
	dev := flags.Bool("dev", false, "allow unsafe defaults (default JWT secret, generated admin token); also GRIDWEAVE_DEV=1")
	addr := flags.String("addr", "", "listen address of the public listener (default :KUBERAY_PORT; in dev mode 127.0.0.1:KUBERAY_PORT)")
	version := flags.Bool("version", false, "print SERVER_VERSION and exit")
	installCRDs := flags.Bool("install-crds", false, "install (or update) the GridweaveJob and GridweaveEndpoint CRDs at start")
	if err := flags.Parse(args); err != nil {
		return err
	}
	cfg, err := serverenv.Read(getenv)
	if err != nil {
		return err
	}
	if getenv("SERVER_VERSION") == "" && builtVersion != "" {
		cfg.ServerVersion = builtVersion
	}
	if *version {
		fmt.Fprintln(stdout, cfg.ServerVersion)
		return nil
	}
	cfg.Dev = cfg.Dev || *dev
	log := slog.New(gridweave.LogHandler(slog.NewJSONHandler(stderr, nil)))
	if cfg.Dev {
		log.Warn("DEV MODE: unsafe defaults are allowed; never run a real master like this")
		if cfg.AdminToken == "" {
			cfg.AdminToken = randhex.String(24)
			fmt.Fprintf(stdout, "dev mode: the admin token of this run is %s\n", cfg.AdminToken)
		}
	}
	rc, err := restConfig(getenv, log)
	if err != nil {
		return err
	}
	if rc == nil && cfg.Store == "kubernetes" {
		return errors.New("KUBERAY_STORE=kubernetes: no Kubernetes API server (set KUBECONFIG, or run in a pod)")
	}
	if rc == nil && *installCRDs {
		return errors.New("--install-crds needs a Kubernetes API server (KUBECONFIG or in-cluster), not the embedded in-memory cluster")
	}
	err = master.Run(ctx, cfg, master.Options{Kubernetes: rc, Replica: getenv("POD_NAME"), InstallCRDs: *installCRDs, Addr: *addr, Agents: embeddedAgents(), Logger: log})
	return serverenv.Explain(err)
}

// restConfig is KUBECONFIG's, else the in-cluster one, else nil.
func restConfig(getenv func(string) string, log *slog.Logger) (*rest.Config, error) {
	if path := getenv("KUBECONFIG"); path != "" {
		rc, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return nil, fmt.Errorf("KUBECONFIG: %w", err)
		}
		log.Info("kubernetes: kubeconfig", "path", path, "host", rc.Host)
		return rc, nil
	}
	if rc, err := rest.InClusterConfig(); err == nil {
		log.Info("kubernetes: in-cluster config", "host", rc.Host)
		return rc, nil
	}
	return nil, nil
}

// backupOrRestore is `server backup --to FILE` (online, while the server
// runs) and `server restore --from FILE` (the server stopped), both on
// the ledger KUBERAY_DB names and the master's identity beside it.
func backupOrRestore(ctx context.Context, command string, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	flags := flag.NewFlagSet("server "+command, flag.ContinueOnError)
	flags.SetOutput(stderr)
	to := flags.String("to", "", "backup: the new file to write (must not exist)")
	from := flags.String("from", "", "restore: the backup to restore (stop the server first)")
	if err := flags.Parse(args); err != nil {
		return err
	}
	cfg, err := serverenv.Read(getenv)
	if err != nil {
		return err
	}
	var copies []master.Copy
	switch {
	case command == "backup" && *to != "":
		copies, err = master.Backup(ctx, cfg, *to)
	case command == "restore" && *from != "":
		copies, err = master.Restore(ctx, cfg, *from)
	case command == "backup":
		return errors.New("server backup: --to FILE is required")
	default:
		return errors.New("server restore: --from FILE is required")
	}
	if command == "backup" {
		for _, c := range copies {
			fmt.Fprintf(stdout, "backed up %s to %s\n", c.From, c.To)
		}
		return err
	}
	restored := map[string]bool{}
	for _, c := range copies {
		restored[c.From] = true
		if c.From != *from {
			fmt.Fprintf(stdout, "restored %s from %s\n", c.To, c.From)
		}
	}
	if err != nil {
		return err
	}
	for _, name := range identity.Files {
		if !restored[*from+"."+name] {
			fmt.Fprintf(stdout, "the backup holds no %s: the master keeps %s as it is (made at start when missing)\n", name, filepath.Join(master.Dir(cfg), name))
		}
	}
	fmt.Fprintf(stdout, "restored %s from %s; start the server\n", cfg.DBPath, *from)
	return nil
}

// migrate is `server migrate --from sqlite --to kubernetes` (or the other
// way): the ledger and the master's identity, from KUBERAY_DB to
// KUBERAY_NAMESPACE of the cluster KUBECONFIG (or the pod) names, or back.
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
	cfg, err := serverenv.Read(getenv)
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
	m, err := master.Migrate(ctx, cfg, rc, *to == "kubernetes", log)
	if m.InstalledCRDs {
		fmt.Fprintf(stdout, "installed the ledger's CRDs (group %s)\n", kubestore.Group)
	}
	if m.Where != "" {
		fmt.Fprintf(stdout, "copied %d keys, %d nodes and %d audit events from %s; read back and verified\n", len(m.Keys), len(m.Nodes), len(m.Audit), m.Where)
	}
	if err != nil {
		return err
	}
	if *to == "kubernetes" {
		fmt.Fprintf(stdout, "the master's WireGuard key, TLS pair and JWT secret are in the Secret %s: start the replicas with KUBERAY_STORE=kubernetes\n", m.Secret)
	} else {
		fmt.Fprintf(stdout, "the master's WireGuard key and TLS pair are beside %s, and JWT_SECRET must be the Secret %s's %s: start the server with KUBERAY_STORE=sqlite\n", cfg.DBPath, m.Secret, identity.JWTSecretKey)
	}
	return nil
}
