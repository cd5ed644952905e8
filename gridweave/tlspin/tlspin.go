package tlspin

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Prefix starts every pin: the hash curl's --pinnedpubkey names.
const Prefix = "sha256//"

// Pin is a certificate's public-key pin: Prefix and the standard base64 of
// the SHA-256 of its SubjectPublicKeyInfo.
type Pin [sha256.Size]byte

// Of returns the pin of cert's public key.
func Of(cert *x509.Certificate) Pin { return sha256.Sum256(cert.RawSubjectPublicKeyInfo) }

// String is the pin as the join command and curl write it.
func (p Pin) String() string { return Prefix + base64.StdEncoding.EncodeToString(p[:]) }

// Parse reads a pin written as String writes it.
func Parse(s string) (Pin, error) {
	digest, ok := strings.CutPrefix(strings.TrimSpace(s), Prefix)
	if !ok {
		return Pin{}, fmt.Errorf("tlspin: %q does not start with %s", s, Prefix)
	}
	raw, err := base64.StdEncoding.DecodeString(digest)
	if err != nil || len(raw) != sha256.Size {
		return Pin{}, fmt.Errorf("tlspin: %q is not %s and the base64 of a SHA-256 digest", s, Prefix)
	}
	return Pin(raw), nil
}

// ErrPinMismatch is a server whose certificate is not the pinned one.
var ErrPinMismatch = errors.New("tlspin: the server's certificate does not match the pinned key")

// ClientConfig returns a TLS configuration that accepts only a server
// whose leaf certificate carries the pinned public key (or one of also).
// CA chains, names and validity dates are not checked: the pin is the
// whole trust.
func ClientConfig(pin Pin, also ...Pin) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		// The pin replaces the CA check; VerifyConnection below still
		// runs, on resumed sessions too, and refuses every other key.
		InsecureSkipVerify: true, //nolint:gosec // pinned below
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return ErrPinMismatch
			}
			got := Of(cs.PeerCertificates[0])
			for _, p := range append([]Pin{pin}, also...) {
				if subtle.ConstantTimeCompare(got[:], p[:]) == 1 {
					return nil
				}
			}
			if len(also) > 0 {
				return fmt.Errorf("%w: it presented %s, none of the %d pinned", ErrPinMismatch, got, len(also)+1)
			}
			return fmt.Errorf("%w: it presented %s, the join command pinned %s", ErrPinMismatch, got, pin)
		},
	}
}

// KeyPair is the master's certificate and key as LoadOrCreate found or
// made them.
type KeyPair struct {
	Certificate tls.Certificate
	Leaf        *x509.Certificate
	Pin         Pin
	// Created is true when this call generated the pair.
	Created bool
	// Missing lists the addresses wanted in the certificate that it does
	// not name (a kept certificate from before an address changed).
	Missing []netip.Addr
}

// LoadOrCreate reads the PEM certificate and key at certFile and keyFile,
// or, when neither exists, generates a self-signed ECDSA P-256 pair whose
// subject alternative names are addrs, writes the key 0600 and the
// certificate 0644, and returns it. One file without the other is an
// error: a half-kept pair would silently change the pin.
func LoadOrCreate(certFile, keyFile string, addrs []netip.Addr) (KeyPair, error) {
	_, certErr := os.Stat(certFile)
	_, keyErr := os.Stat(keyFile)
	switch {
	case certErr == nil && keyErr == nil:
		return load(certFile, keyFile, addrs)
	case errors.Is(certErr, os.ErrNotExist) && errors.Is(keyErr, os.ErrNotExist):
		return create(certFile, keyFile, addrs)
	case certErr != nil && !errors.Is(certErr, os.ErrNotExist):
		return KeyPair{}, certErr
	case keyErr != nil && !errors.Is(keyErr, os.ErrNotExist):
		return KeyPair{}, keyErr
	case certErr != nil:
		return KeyPair{}, fmt.Errorf("tlspin: %s exists but %s does not; restore both or remove %s to generate a new pair (joined nodes then need the new join command)", keyFile, certFile, keyFile)
	default:
		return KeyPair{}, fmt.Errorf("tlspin: %s exists but %s does not; restore both or remove %s to generate a new pair (joined nodes then need the new join command)", certFile, keyFile, certFile)
	}
}

// Load reads a certificate and key kept as PEM files (a CA's or one
// LoadOrCreate made).
func Load(certFile, keyFile string) (KeyPair, error) { return load(certFile, keyFile, nil) }

func load(certFile, keyFile string, addrs []netip.Addr) (KeyPair, error) {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return KeyPair{}, fmt.Errorf("tlspin: %s and %s: %w", certFile, keyFile, err)
	}
	kp := KeyPair{Certificate: pair, Leaf: pair.Leaf, Pin: Of(pair.Leaf)}
	for _, a := range addrs {
		if !slices.ContainsFunc(pair.Leaf.IPAddresses, func(ip net.IP) bool {
			got, ok := netip.AddrFromSlice(ip)
			return ok && got.Unmap() == a.Unmap()
		}) {
			kp.Missing = append(kp.Missing, a)
		}
	}
	return kp, nil
}

func create(certFile, keyFile string, addrs []netip.Addr) (KeyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return KeyPair{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return KeyPair{}, err
	}
	now := time.Now()
	template := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "gridweave master"},
		NotBefore:    now.Add(-time.Hour),
		// Pinned clients ignore the dates; browsers and CA-checking
		// clients see a self-signed certificate either way.
		NotAfter:              now.AddDate(20, 0, 0),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		DNSNames:              []string{"localhost"},
	}
	for _, a := range addrs {
		template.IPAddresses = append(template.IPAddresses, a.AsSlice())
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		return KeyPair{}, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return KeyPair{}, err
	}
	// The key first: a crash between the two leaves a key without a
	// certificate, which LoadOrCreate refuses rather than re-keys.
	if err := writeNew(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return KeyPair{}, err
	}
	if err := writeNew(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return KeyPair{}, err
	}
	kp, err := load(certFile, keyFile, addrs)
	kp.Created = true
	return kp, err
}

// writeNew writes data to a file that must not exist yet, through a
// temporary file renamed into place, so a reader never sees half a PEM.
func writeNew(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Link(tmp.Name(), path); err != nil { // fails if path appeared meanwhile
		return err
	}
	return nil
}
