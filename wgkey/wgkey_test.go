package wgkey_test

import (
	"encoding/json"
	"errors"
	"testing"

	"gridweave.dev/wgkey"
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
	priv := wgkey.MustParse("YNqHbfBQKaGvzefSSHeTGP4gLxAZNtzRgiOqw+RChnc=")
	a, _ := priv.Public()
	b, _ := priv.Public()
	if a != b || a == priv || a.IsZero() {
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
