package identity

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"time"

	"gridweave.dev/gridweave/tlspin"
)

// ChannelServerName is the name a replica asks for (TLS SNI) on the
// replicas' channel: the leader answers it with the channel's pair
// (ChannelPair), and any other name with the public listener's, which
// replicas of earlier versions pin.
const ChannelServerName = "replica-channel.gridweave.invalid"

// ChannelPair is the TLS pair of the replicas' channel, derived from the
// secret every replica shares (the JWT secret): every replica computes
// the same key, so each pins the others without anything more in the
// shared Secret, and one without the secret can neither serve it nor
// take the replicas' credential, with the public listener's TLS on or
// off.
func ChannelPair(sharedSecret string) (tls.Certificate, tlspin.Pin, error) {
	seed := hmac.New(sha256.New, []byte(sharedSecret))
	seed.Write([]byte("gridweave.dev replica channel key"))
	key := ed25519.NewKeyFromSeed(seed.Sum(nil))
	template := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "gridweave replica channel"},
		// Pinned clients ignore the dates.
		NotBefore:             time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfter:              time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		DNSNames:              []string{ChannelServerName},
	}
	// An Ed25519 signature takes no randomness: the same secret gives
	// the same certificate.
	der, err := x509.CreateCertificate(nil, template, template, key.Public(), key)
	if err != nil {
		return tls.Certificate{}, tlspin.Pin{}, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, tlspin.Pin{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, tlspin.Of(leaf), nil
}
