package wgkey_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"gridweave.dev/mesh/wgkey"
)

func TestParseRoundTrip(t *testing.T) {
	priv, err := wgkey.GeneratePrivate()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := priv.Public()
	if err != nil {
		t.Fatal(err)
	}
	got, err := wgkey.Parse(pub.String())
	if err != nil || got != pub {
		t.Fatalf("Parse(String()) = %v, %v; want %v", got, err, pub)
	}
	data, _ := json.Marshal(map[string]wgkey.Key{"k": pub})
	var back map[string]wgkey.Key
	if err := json.Unmarshal(data, &back); err != nil || back["k"] != pub {
		t.Fatalf("JSON round trip = %v, %v", back, err)
	}
}

// A known vector: `wg pubkey` of the all-zero-but-clamped key is fixed by
// RFC 7748; here we only check that Public is deterministic and differs
// from the private key.
func TestPublicIsDeterministic(t *testing.T) {
	priv, err := wgkey.ParsePrivate("YNqHbfBQKaGvzefSSHeTGP4gLxAZNtzRgiOqw+RChnc=")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := priv.Public()
	b, _ := priv.Public()
	if a != b || a == wgkey.Key(priv) || a.IsZero() {
		t.Fatalf("Public() = %v, %v", a, b)
	}
}

func TestParseRejects(t *testing.T) {
	for _, in := range []string{
		"",
		"not-base64",
		"AAAA",
		"YNqHbfBQKaGvzefSSHeTGP4gLxAZNtzRgiOqw+RChnc",   // no padding
		"YNqHbfBQKaGvzefSSHeTGP4gLxAZNtzRgiOqw+RChnc==", // 45 chars
		"YNqHbfBQKaGvzefSSHeTGP4gLxAZNtzRgiOqw-RChnc=",  // URL alphabet
		"YNqHbfBQKaGvzefSSHeTGP4gLxAZNtzRgiOqw+RChnd=",  // non-zero trailing bits
	} {
		if _, err := wgkey.Parse(in); !errors.Is(err, wgkey.ErrInvalid) {
			t.Errorf("Parse(%q) error = %v, want ErrInvalid", in, err)
		}
	}
}

// TestPrivateKeyNeverPrints holds the private key type to its promise:
// fmt verbs, slog handlers and text/JSON marshalling never show its bytes.
func TestPrivateKeyNeverPrints(t *testing.T) {
	priv, pub, err := wgkey.GeneratePair()
	if err != nil {
		t.Fatal(err)
	}
	secret := priv.Base64()
	if back, err := wgkey.ParsePrivate(secret); err != nil || back != priv {
		t.Fatalf("ParsePrivate(Base64()) = %v", err)
	}
	type config struct {
		Private wgkey.PrivateKey
		Public  wgkey.Key
	}
	c := config{priv, pub}
	var logs bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	logger.Info("device", "private_key", priv, "config", c)
	slog.New(slog.NewTextHandler(&logs, nil)).Info("device", "private_key", priv)
	printed := fmt.Sprintf("%v %+v %#v %s %v", priv, c, c, priv, []wgkey.PrivateKey{priv})
	for _, out := range []string{printed, logs.String()} {
		if strings.Contains(out, secret) {
			t.Errorf("the private key leaked: %s", out)
		}
	}
	if _, err := json.Marshal(c); !errors.Is(err, wgkey.ErrPrivateKeyText) {
		t.Errorf("json.Marshal of a private key = %v, want ErrPrivateKeyText", err)
	}
	var back struct{ Private wgkey.PrivateKey }
	if err := json.Unmarshal([]byte(`{"Private":"`+secret+`"}`), &back); err != nil || back.Private != priv {
		t.Errorf("a stored private key does not read back: %v", err)
	}
	if !strings.Contains(fmt.Sprint(pub), pub.String()) {
		t.Error("a public key should print")
	}
}
