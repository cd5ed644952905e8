// Command joinload drives the join flow of a control-plane server over
// HTTP, as many machines joining at once would, and reports joins per
// second for the whole run and for its first and last tenth: whether
// registration stays flat as the fleet grows.
//
//	go run ./examples/joinload -url http://127.0.0.1:8800 -token "$ADMIN_TOKEN" -nodes 2000 -clients 16 -gpus
//
// Each join is a validate and a register of a new machine (its own
// WireGuard key) with a key minted for the run; -gpus gives the machines
// GPUs of three kinds, so that every register places a worker. The run is
// bounded by -nodes and -timeout. Point it only at a server you run: it
// leaves the machines in the ledger.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "joinload:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	flags := flag.NewFlagSet("joinload", flag.ContinueOnError)
	o := Options{}
	flags.StringVar(&o.URL, "url", "http://127.0.0.1:8800", "the server's public listener")
	flags.StringVar(&o.AdminToken, "token", getenv("ADMIN_TOKEN"), "the admin token (default $ADMIN_TOKEN)")
	flags.IntVar(&o.Nodes, "nodes", 1000, "machines to join")
	flags.IntVar(&o.Clients, "clients", 16, "machines joining at once")
	flags.BoolVar(&o.GPUs, "gpus", false, "give the machines GPUs (three kinds)")
	flags.StringVar(&o.Prefix, "prefix", "load", "hostname prefix: <prefix>-<n>")
	flags.StringVar(&o.Version, "version", "", "the agent version the machines report (default the server's)")
	flags.StringVar(&o.Pin, "pin", "", "an https server's certificate pin (MASTER_PIN of its join command, sha256//...)")
	timeout := flags.Duration("timeout", 10*time.Minute, "stop after this long")
	if err := flags.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	rep, err := Run(ctx, o)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, rep)
	return nil
}
