package sqlitestore_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"gridweave.dev/joinkeys"
	"gridweave.dev/joinkeys/sqlitestore"
	"gridweave.dev/joinkeys/storetest"
	"gridweave.dev/mesh/wgkey"
)

const (
	crashChildDB  = "SQLITESTORE_CRASH_CHILD_DB"
	crashChildKey = "SQLITESTORE_CRASH_CHILD_KEY"
	crashChildTag = "SQLITESTORE_CRASH_CHILD_TAG"
	// crashChildSync is "normal" for a child on SyncNormal.
	crashChildSync = "SQLITESTORE_CRASH_CHILD_SYNC"
)

func TestMain(m *testing.M) {
	if db := os.Getenv(crashChildDB); db != "" {
		os.Exit(crashChild(db, os.Getenv(crashChildKey), os.Getenv(crashChildTag)))
	}
	os.Exit(m.Run())
}

func keyring(t testing.TB, s joinkeys.Store) *joinkeys.Keyring {
	kr, err := joinkeys.New(s, &joinkeys.Options{JWTSecret: storetest.Secret, Pool: joinkeys.MustPool("198.18.0.0/16", "198.18.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

// crashChild reserves nodes until it is killed, printing "ack HOST IP" only
// after each reservation has been committed.
func crashChild(path, key, tag string) int {
	ctx := context.Background()
	opts := &sqlitestore.Options{}
	if os.Getenv(crashChildSync) == "normal" {
		opts.Sync = sqlitestore.SyncNormal
	}
	s, err := sqlitestore.Open(ctx, path, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	kr, err := joinkeys.New(s, &joinkeys.Options{JWTSecret: storetest.Secret, Pool: joinkeys.MustPool("198.18.0.0/16", "198.18.0.1")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	out := bufio.NewWriter(os.Stdout)
	for i := 0; ; i++ {
		host := fmt.Sprintf("%s-%d", tag, i)
		_, pub, err := wgkey.GeneratePair()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		res, err := kr.Join(ctx, joinkeys.JoinRequest{Key: key, Hostname: host, PublicKey: pub.String()})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		fmt.Fprintf(out, "ack %s %s\n", host, res.Node.VPNIP)
		out.Flush()
	}
}

// TestCrashKeepsAcknowledgedReservations kills a reserving child with
// SIGKILL at random moments, ten times, and checks after each restart that
// every acknowledged reservation is there, nothing is duplicated, and the
// database passes integrity_check.
func TestCrashKeepsAcknowledgedReservations(t *testing.T) {
	if testing.Short() {
		t.Skip("kills child processes; run make test")
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "crash.db")
	s := open(t, path)
	m, err := keyring(t, s).Mint(ctx, joinkeys.MintRequest{Kind: joinkeys.KindOrg, Org: "acme", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()

	seed := uint64(time.Now().UnixNano())
	t.Logf("random seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	acked := map[string]netip.Addr{}
	for round := range 10 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildDB+"="+path, crashChildKey+"="+m.Secret, fmt.Sprintf("%s=r%d", crashChildTag, round))
		if round%2 == 1 { // every other child on SyncNormal: a process crash loses nothing there either
			cmd.Env = append(cmd.Env, crashChildSync+"=normal")
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		// Wait for the first acknowledgement, then kill at a random moment.
		first, ok := <-lines
		if !ok {
			_ = cmd.Wait()
			t.Fatalf("round %d: child acknowledged nothing: %s", round, stderr.String())
		}
		record := func(line string) {
			var host, ip string
			if _, err := fmt.Sscanf(line, "ack %s %s", &host, &ip); err != nil {
				t.Fatalf("bad child line %q", line)
			}
			acked[host] = netip.MustParseAddr(ip)
		}
		record(first)
		deadline := time.After(time.Duration(20+rng.IntN(300)) * time.Millisecond)
	collect:
		for {
			select {
			case line := <-lines:
				record(line)
			case <-deadline:
				break collect
			}
		}
		_ = cmd.Process.Signal(syscall.SIGKILL)
		for line := range lines {
			record(line)
		}
		_ = cmd.Wait()
		// A child that stopped on its own (an error, a panic) proves nothing
		// about crashes: it must have died of the SIGKILL.
		if status, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !status.Signaled() || status.Signal() != syscall.SIGKILL {
			t.Fatalf("round %d: the child was not killed by SIGKILL but ended with %v: %s", round, cmd.ProcessState, stderr.String())
		}

		s := open(t, path)
		if err := s.IntegrityCheck(ctx); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		nodes, err := s.Nodes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		stored := map[string]netip.Addr{}
		ips := map[netip.Addr]string{}
		for _, n := range nodes {
			if other, dup := ips[n.VPNIP]; dup {
				t.Fatalf("round %d: %s held by %s and %s", round, n.VPNIP, other, n.Hostname)
			}
			ips[n.VPNIP] = n.Hostname
			stored[n.Hostname] = n.VPNIP
		}
		for host, ip := range acked {
			if got, ok := stored[host]; !ok || got != ip {
				t.Fatalf("round %d: acknowledged %s → %s, stored %v (present %v)", round, host, ip, got, ok)
			}
		}
		k, err := s.Key(ctx, m.ID)
		if err != nil || k.Uses != len(nodes) {
			t.Fatalf("round %d: key uses %d for %d nodes (%v)", round, k.Uses, len(nodes), err)
		}
		s.Close()
	}
	t.Logf("%d acknowledged reservations survived 10 SIGKILLs", len(acked))
}

func TestReopenKeepsLedgerAndMigrationsOnce(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "reopen.db")
	s := open(t, path)
	kr := keyring(t, s)
	m, err := kr.Mint(ctx, joinkeys.MintRequest{Kind: joinkeys.KindOrg, Org: "acme", TTL: time.Hour, Labels: map[string]string{"a": "b"}})
	if err != nil {
		t.Fatal(err)
	}
	j, err := kr.Join(ctx, joinkeys.JoinRequest{Key: m.Secret, Hostname: "keep", PublicKey: storetest.PublicKey(t)})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()

	s = open(t, path)
	defer s.Close()
	if v, err := s.SchemaVersion(ctx); err != nil || v != 5 {
		t.Fatalf("schema version %d, %v", v, err)
	}
	kr = keyring(t, s)
	if _, err := kr.Check(ctx, m.Secret); err != nil {
		t.Fatalf("key lost across reopen: %v", err)
	}
	n, err := kr.AuthenticateNode(ctx, "keep", j.NodeToken)
	if err != nil || n.VPNIP != j.Node.VPNIP {
		t.Fatalf("node after reopen %+v, %v", n, err)
	}
	// The secret is not in the file.
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	wal, _ := os.ReadFile(path + "-wal")
	secret := m.Secret[len(m.Secret)-64:]
	if strings.Contains(string(data)+string(wal), secret) || strings.Contains(string(data)+string(wal), j.NodeToken) {
		t.Fatal("a secret is stored in plain text")
	}
}
