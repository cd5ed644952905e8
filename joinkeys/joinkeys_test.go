package joinkeys_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gridweave.dev/joinkeys"
	"gridweave.dev/joinkeys/memstore"
	"gridweave.dev/joinkeys/storetest"
	"gridweave.dev/mesh/wgkey"
)

func TestNewPoolNamesTheField(t *testing.T) {
	for _, c := range []struct {
		prefix   string
		reserved []string
		field    string
		says     string
	}{
		{"2001:db8::/64", nil, "vpn_cidr", "not an IPv4 prefix"},
		{"198.18.0.1/24", nil, "vpn_cidr", "host bits"},
		{"198.18.0.0/31", nil, "vpn_cidr", "too small"},
		{"198.0.0.0/7", nil, "vpn_cidr", "too large"},
		{"198.18.0.0/24", []string{"198.19.0.1"}, "master_vpn_ip", "not inside"},
		{"198.18.0.0/30", []string{"198.18.0.1", "198.18.0.2"}, "vpn_cidr", "no address left"},
	} {
		var reserved []netip.Addr
		for _, r := range c.reserved {
			reserved = append(reserved, netip.MustParseAddr(r))
		}
		_, err := joinkeys.NewPool(netip.MustParsePrefix(c.prefix), reserved...)
		var fe *joinkeys.FieldError
		if !errors.As(err, &fe) || fe.Field != c.field || !strings.Contains(err.Error(), c.says) {
			t.Errorf("NewPool(%s, %v) = %v; want a %s error saying %q", c.prefix, c.reserved, err, c.field, c.says)
		}
	}
	if _, err := joinkeys.NewPool(netip.Prefix{}); err == nil {
		t.Error("NewPool of an invalid prefix succeeded")
	}
	p := joinkeys.MustPool("198.18.0.0/24", "198.18.0.1")
	if p.Size() != 253 {
		t.Errorf("a /24 with the master reserved has %d node addresses, want 253", p.Size())
	}
}

func TestNewRefusesAShortJWTSecret(t *testing.T) {
	_, err := joinkeys.New(new(memstore.Store), &joinkeys.Options{JWTSecret: []byte("dev-secret-change-me")})
	var fe *joinkeys.FieldError
	if !errors.As(err, &fe) || fe.Field != "jwt_secret" {
		t.Fatalf("New with a 20-byte secret = %v, want a jwt_secret error", err)
	}
}

// TestLogsNeverHoldSecrets runs the whole flow with a logger and checks
// that no key secret, JWT or node token reaches the log.
func TestLogsNeverHoldSecrets(t *testing.T) {
	ctx := context.Background()
	var logs bytes.Buffer
	kr, err := joinkeys.New(new(memstore.Store), &joinkeys.Options{
		JWTSecret: storetest.Secret,
		Pool:      joinkeys.MustPool("198.18.0.0/24", "198.18.0.1"),
		Logger:    slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	org, _ := kr.Mint(ctx, joinkeys.MintRequest{Kind: joinkeys.KindOrg, Org: "acme", TTL: time.Hour})
	prov, _ := kr.Mint(ctx, joinkeys.MintRequest{Kind: joinkeys.KindProvider, Org: "acme", Provider: "p", TTL: time.Hour})
	j, err := kr.Join(ctx, joinkeys.JoinRequest{Key: org.Secret, Hostname: "n1", PublicKey: storetest.PublicKey(t)})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = kr.Join(ctx, joinkeys.JoinRequest{Key: org.Secret + "0", Hostname: "n2", PublicKey: storetest.PublicKey(t)})
	_, _ = kr.Register(ctx, joinkeys.Registration{NodeToken: j.NodeToken, Hostname: "n1"})
	_, _ = kr.Revoke(ctx, org.ID, "admin")
	out := logs.String()
	if !strings.Contains(out, org.ID) {
		t.Fatalf("the log should name the key id:\n%s", out)
	}
	for name, secret := range map[string]string{"org secret": org.Secret[len(org.Secret)-64:], "provider JWT": prov.Secret, "node token": j.NodeToken} {
		if strings.Contains(out, secret) {
			t.Errorf("the log holds the %s", name)
		}
	}
}

func Example() {
	ctx := context.Background()
	kr, _ := joinkeys.New(new(memstore.Store), &joinkeys.Options{
		JWTSecret: []byte("example-secret-at-least-32-bytes-long"),
		Pool:      joinkeys.MustPool("198.18.0.0/24", "198.18.0.1"), // .1 is the master
	})
	key, _ := kr.Mint(ctx, joinkeys.MintRequest{Kind: joinkeys.KindOrg, Org: "acme", TTL: 24 * time.Hour})

	// A GPU owner's machine joins with the key and its WireGuard public key.
	pub := "HIgo9xNzJMWLKASShiTqIybxZ0U3wGLiUeJ1PKf8ykw="
	first, _ := kr.Join(ctx, joinkeys.JoinRequest{Key: key.Secret, Hostname: "gpu-box-1", PublicKey: pub})
	fmt.Println(first.Node.VPNIP, first.Node.Status)

	// After a reboot it re-joins with its node token and keeps its address.
	again, _ := kr.Join(ctx, joinkeys.JoinRequest{NodeToken: first.NodeToken, Hostname: "gpu-box-1", PublicKey: pub})
	fmt.Println(again.Node.VPNIP, again.Rejoined)

	// Another machine cannot take the hostname.
	_, err := kr.Join(ctx, joinkeys.JoinRequest{Key: key.Secret, Hostname: "gpu-box-1", PublicKey: "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg="})
	fmt.Println(errors.Is(err, joinkeys.ErrHostnameTaken))
	// Output:
	// 198.18.0.2 validated
	// 198.18.0.2 true
	// true
}

// staleByKey is a store whose lookup by public key is a cache that has
// not seen any node yet, as a replica's watch cache may be just after a
// first join.
type staleByKey struct{ joinkeys.Store }

func (staleByKey) NodeByPublicKey(context.Context, wgkey.Key) (joinkeys.NodeRecord, error) {
	return joinkeys.NodeRecord{}, joinkeys.ErrNodeNotFound
}

// A re-join with the node token goes through when the lookup by key lags
// behind: the record read by hostname settles it. Another machine's key
// under that hostname is still refused.
func TestRejoinWhenTheLookupByKeyLags(t *testing.T) {
	ctx := context.Background()
	kr, err := joinkeys.New(staleByKey{new(memstore.Store)}, &joinkeys.Options{JWTSecret: storetest.Secret, Pool: joinkeys.MustPool("198.18.0.0/24", "198.18.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	key, err := kr.Mint(ctx, joinkeys.MintRequest{Kind: joinkeys.KindOrg, Org: "acme", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	pub := "HIgo9xNzJMWLKASShiTqIybxZ0U3wGLiUeJ1PKf8ykw="
	first, err := kr.Join(ctx, joinkeys.JoinRequest{Key: key.Secret, Hostname: "gpu-box-1", PublicKey: pub})
	if err != nil {
		t.Fatal(err)
	}
	again, err := kr.Join(ctx, joinkeys.JoinRequest{NodeToken: first.NodeToken, Hostname: "gpu-box-1", PublicKey: pub})
	if err != nil || !again.Rejoined || again.Node.VPNIP != first.Node.VPNIP {
		t.Fatalf("re-join with the node token: %+v, %v", again, err)
	}
	other := "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg="
	if _, err := kr.Join(ctx, joinkeys.JoinRequest{NodeToken: first.NodeToken, Hostname: "gpu-box-1", PublicKey: other}); !errors.Is(err, joinkeys.ErrNodeTokenInvalid) {
		t.Errorf("the token with another key: %v, want ErrNodeTokenInvalid", err)
	}
	if _, err := kr.Join(ctx, joinkeys.JoinRequest{NodeToken: "gwn_" + strings.Repeat("0", 64), Hostname: "gpu-box-1", PublicKey: pub}); !errors.Is(err, joinkeys.ErrNodeTokenInvalid) {
		t.Errorf("a wrong token: %v, want ErrNodeTokenInvalid", err)
	}
}

// TestSecretsRedactThemselves: the types that carry a join key or a node
// token format and log themselves without it, whatever the verb or handler.
func TestSecretsRedactThemselves(t *testing.T) {
	ctx := context.Background()
	kr, err := joinkeys.New(new(memstore.Store), &joinkeys.Options{JWTSecret: storetest.Secret, Pool: joinkeys.MustPool("198.18.0.0/24", "198.18.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	minted, _ := kr.Mint(ctx, joinkeys.MintRequest{Kind: joinkeys.KindOrg, Org: "acme", TTL: time.Hour})
	provider, _ := kr.Mint(ctx, joinkeys.MintRequest{Kind: joinkeys.KindProvider, Org: "acme", Provider: "p", TTL: time.Hour})
	req := joinkeys.JoinRequest{Key: minted.Secret, Hostname: "n1", PublicKey: storetest.PublicKey(t)}
	res, err := kr.Join(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	rejoin := joinkeys.JoinRequest{NodeToken: res.NodeToken, Hostname: "n1", PublicKey: req.PublicKey}
	reg := joinkeys.Registration{NodeToken: res.NodeToken, Key: provider.Secret, Hostname: "n1"}
	values := []any{minted, provider, req, rejoin, res, reg}
	var out bytes.Buffer
	for _, v := range values {
		fmt.Fprintf(&out, "%v %+v %#v %s\n", v, v, v, v)
	}
	json := slog.New(slog.NewJSONHandler(&out, nil))
	text := slog.New(slog.NewTextHandler(&out, nil))
	for _, v := range values {
		json.Info("x", "value", v)
		text.Info("x", "value", v)
	}
	for name, secret := range map[string]string{"org key": minted.Secret, "provider JWT": provider.Secret, "node token": res.NodeToken} {
		if strings.Contains(out.String(), secret) {
			t.Errorf("the %s leaked:\n%s", name, out.String())
		}
	}
	if !strings.Contains(out.String(), "n1") || !strings.Contains(out.String(), minted.ID) {
		t.Errorf("redaction hid what is not secret:\n%s", out.String())
	}
}

// TestHostnameTakenSaysNothingOfTheOtherMachine: the error reaches the
// machine that asked; the holder's key and address stay in its fields.
func TestHostnameTakenSaysNothingOfTheOtherMachine(t *testing.T) {
	ctx := context.Background()
	kr, err := joinkeys.New(new(memstore.Store), &joinkeys.Options{JWTSecret: storetest.Secret, Pool: joinkeys.MustPool("198.18.0.0/24", "198.18.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := kr.Mint(ctx, joinkeys.MintRequest{Kind: joinkeys.KindOrg, Org: "acme", TTL: time.Hour})
	first, err := kr.Join(ctx, joinkeys.JoinRequest{Key: m.Secret, Hostname: "box", PublicKey: storetest.PublicKey(t)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = kr.Join(ctx, joinkeys.JoinRequest{Key: m.Secret, Hostname: "box", PublicKey: storetest.PublicKey(t)})
	var taken *joinkeys.HostnameTakenError
	if !errors.As(err, &taken) || taken.Existing.VPNIP != first.Node.VPNIP {
		t.Fatalf("second machine: %v", err)
	}
	msg := err.Error()
	if strings.Contains(msg, first.Node.PublicKey.String()) || strings.Contains(msg, first.Node.VPNIP.String()) || !strings.Contains(msg, `"box"`) || !strings.Contains(msg, "disconnect") {
		t.Errorf("message %q: want the hostname and how to free it, not the holder's key or address", msg)
	}
}

// TestVersionReportsAreAudited: a report of a new version is an audit
// event saying what it was; the same version again is not.
func TestVersionReportsAreAudited(t *testing.T) {
	ctx := context.Background()
	kr, err := joinkeys.New(new(memstore.Store), &joinkeys.Options{JWTSecret: storetest.Secret, Pool: joinkeys.MustPool("198.18.0.0/24", "198.18.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := kr.Mint(ctx, joinkeys.MintRequest{Kind: joinkeys.KindOrg, Org: "acme", TTL: time.Hour})
	joined, err := kr.Join(ctx, joinkeys.JoinRequest{Key: m.Secret, Hostname: "box", PublicKey: storetest.PublicKey(t), Version: "1.4.2"})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"1.4.2", "1.5.0", "1.5.0"} {
		if _, err := kr.ReportVersion(ctx, "box", joined.NodeToken, v); err != nil {
			t.Fatal(err)
		}
	}
	events, err := kr.Audit(ctx, joinkeys.AuditQuery{Hostname: "box", Type: joinkeys.EventVersionReported})
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 1 || events[0].Reason != "version 1.5.0 (was 1.4.2)" || events[0].KeyID != m.Key.ID {
		t.Errorf("version events %+v, want one of 1.5.0", events)
	}
}

// countingStore counts the node reads a Keyring makes.
type countingStore struct {
	joinkeys.Store
	nodeReads atomic.Int64
}

func (s *countingStore) Node(ctx context.Context, hostname string) (joinkeys.NodeRecord, error) {
	s.nodeReads.Add(1)
	return s.Store.Node(ctx, hostname)
}

// A hostname that names no node is read from the store once per
// missTTL, however often it is probed with made-up tokens; a join of that
// hostname is seen at once.
func TestMissesOfUnknownHostnamesAreCached(t *testing.T) {
	ctx := context.Background()
	store := &countingStore{Store: new(memstore.Store)}
	clock := storetest.NewClock()
	kr, err := joinkeys.New(store, &joinkeys.Options{JWTSecret: storetest.Secret, Pool: joinkeys.MustPool("198.18.0.0/24", "198.18.0.1"), Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	for range 1000 {
		if _, err := kr.AuthenticateNode(ctx, "ghost", "gwn_"+strings.Repeat("0", 64)); !errors.Is(err, joinkeys.ErrNodeTokenInvalid) {
			t.Fatalf("a probe of an unknown hostname: %v", err)
		}
	}
	if n := store.nodeReads.Load(); n != 1 {
		t.Errorf("1000 probes of one unknown hostname read the store %d times, want 1", n)
	}
	clock.Advance(3 * time.Second)
	_, _ = kr.AuthenticateNode(ctx, "ghost", "gwn_"+strings.Repeat("0", 64))
	if n := store.nodeReads.Load(); n != 2 {
		t.Errorf("after the miss expired: %d reads, want 2", n)
	}
	m, _ := kr.Mint(ctx, joinkeys.MintRequest{Kind: joinkeys.KindOrg, Org: "acme", TTL: time.Hour})
	joined, err := kr.Join(ctx, joinkeys.JoinRequest{Key: m.Secret, Hostname: "ghost", PublicKey: storetest.PublicKey(t), Version: "1.4.2"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kr.AuthenticateNode(ctx, "ghost", joined.NodeToken); err != nil {
		t.Errorf("the node that joined under the probed name: %v", err)
	}
}

// Rejected attempts are written once per hostname and reason a minute,
// their repeats summed up when the minute is over, and past the minute's
// cap counted in one event.
func TestRejectedAttemptsAreAggregated(t *testing.T) {
	ctx := context.Background()
	store := new(memstore.Store)
	clock := storetest.NewClock()
	kr, err := joinkeys.New(store, &joinkeys.Options{JWTSecret: storetest.Secret, Pool: joinkeys.MustPool("198.18.0.0/24", "198.18.0.1"),
		Now: clock.Now, RejectionsPerMinute: 10})
	if err != nil {
		t.Fatal(err)
	}
	bad := "gwk_000000000000." + strings.Repeat("0", 64)
	join := func(host string) {
		if _, err := kr.Join(ctx, joinkeys.JoinRequest{Key: bad, Hostname: host, PublicKey: storetest.PublicKey(t), Version: "1.0.0"}); err == nil {
			t.Fatal("a made-up key was accepted")
		}
	}
	for i := range 300 {
		join(fmt.Sprintf("box-%d", i%3))
	}
	rejected := func() []joinkeys.AuditEvent {
		events, err := kr.Audit(ctx, joinkeys.AuditQuery{Type: joinkeys.EventValidationRejected})
		if err != nil {
			t.Fatal(err)
		}
		return events
	}
	if n := len(rejected()); n != 3 {
		t.Fatalf("300 rejections of 3 hostnames wrote %d events in their minute, want 3", n)
	}
	clock.Advance(61 * time.Second)
	for i := range 50 { // 50 hostnames: 10 recorded, 40 counted
		join(fmt.Sprintf("probe-%d", i))
	}
	events := rejected()
	summaries := 0
	for _, e := range events {
		if strings.Contains(e.Reason, "99 more times in the minute") {
			summaries++
		}
	}
	if summaries != 3 || len(events) != 3+3+10 {
		t.Errorf("after the minute: %d events, %d summaries of 99 repeats: %+v", len(events), summaries, events)
	}
	clock.Advance(61 * time.Second)
	if _, err := kr.CompactAudit(ctx); err != nil {
		t.Fatal(err)
	}
	last := rejected()
	if len(last) != 17 || !strings.Contains(last[16].Reason, "40 more rejected attempts from 40 hostnames") {
		t.Errorf("the minute's overflow: %+v", last[len(last)-1])
	}
}
