package master

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"gridweave.dev/gridweave"
)

// listener is one of the master's listeners; freebind binds its address
// even while no interface holds it.
type listener struct {
	server   *http.Server
	freebind bool
}

// serve runs the listeners until ctx ends, then lets in-flight requests
// finish within timeout.
func serve(ctx context.Context, listeners []listener, timeout time.Duration, log *slog.Logger) error {
	errc := make(chan error, len(listeners))
	var servers []*http.Server
	for _, l := range listeners {
		s := l.server
		ln, err := listenTCP(ctx, s.Addr, l.freebind)
		if err != nil {
			return err
		}
		servers = append(servers, s)
		if s.TLSConfig != nil {
			log.Info("listening (HTTPS)", "addr", ln.Addr().String())
			go func() { errc <- s.ServeTLS(ln, "", "") }()
			continue
		}
		log.Info("listening", "addr", ln.Addr().String())
		go func() { errc <- s.Serve(ln) }()
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down: finishing in-flight requests", "timeout", timeout)
	stop, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var errs []error
	for _, s := range servers {
		errs = append(errs, s.Shutdown(stop))
	}
	return errors.Join(errs...)
}

// PlaceAgents serves the join agents in embedded (files named
// join-node-*, built into the program) when cfg.AgentDir names no others:
// they are written into the master's directory (agents/, only what
// changed) and cfg.AgentDir is set to it. A nil log discards.
func PlaceAgents(cfg *gridweave.Config, embedded fs.FS, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	switch {
	case cfg.AgentDir != "":
		log.Info("join agents: "+cfg.Name("AgentDir"), "dir", cfg.AgentDir)
		return nil
	case embedded == nil:
		log.Warn("no join agents: this binary was built without them (make server-static embeds them) and " + cfg.Name("AgentDir") + " is not set, so the join command cannot fetch one")
		return nil
	}
	dir := filepath.Join(Dir(*cfg), "agents")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("the join agents: %w", err)
	}
	names, err := fs.Glob(embedded, "join-node-*")
	if err != nil {
		return err
	}
	for _, name := range names {
		data, err := fs.ReadFile(embedded, name)
		if err != nil {
			return err
		}
		path := filepath.Join(dir, name)
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
			continue
		}
		tmp := path + ".new"
		if err := os.WriteFile(tmp, data, 0o755); err != nil {
			return fmt.Errorf("the join agents: %w", err)
		}
		if err := os.Rename(tmp, path); err != nil {
			return fmt.Errorf("the join agents: %w", err)
		}
	}
	cfg.AgentDir = dir
	log.Info("join agents: built into this binary", "dir", dir, "agents", fmt.Sprint(names))
	return nil
}
