package kubeletjoin

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

const (
	// BootstrapGroup is the group of every bootstrap token Tokens makes,
	// beside system:bootstrappers: the deploy files let it create
	// certificate signing requests (system:node-bootstrapper).
	BootstrapGroup = "system:bootstrappers:gridweave"
	// TokenNamespace is where the API server looks for bootstrap tokens.
	TokenNamespace = "kube-system"
	// DefaultTokenTTL is a token's life unless Tokens.TTL says otherwise:
	// long enough for a machine to install and start its kubelet.
	DefaultTokenTTL = 30 * time.Minute
	// tokenChars are a bootstrap token's characters ([a-z0-9]).
	tokenChars = "abcdefghijklmnopqrstuvwxyz0123456789"
)

// NodeGroup is the group a token made for the machine hostname carries,
// binding the token to that machine (an HMAC of its public key under the
// master's secret: fleet.Marker.TokenBinding): the API server adds it to
// every request the token makes.
func NodeGroup(hostname, binding string) string {
	return BootstrapGroup + ":node:" + hostname + ":" + binding
}

// Tokens makes bootstrap tokens.
type Tokens struct {
	Client kubernetes.Interface
	// TTL is a token's life; default DefaultTokenTTL.
	TTL time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Issue makes a bootstrap token for the machine hostname, bound to it by
// binding (NodeGroup), and returns it (id.secret). The controller-manager's
// token cleaner deletes it once it expired.
func (t Tokens) Issue(ctx context.Context, hostname, binding string) (string, error) {
	if t.Client == nil {
		return "", errors.New("kubeletjoin: Tokens need a Kubernetes client")
	}
	ttl, now := t.TTL, time.Now
	if ttl <= 0 {
		ttl = DefaultTokenTTL
	}
	if t.Now != nil {
		now = t.Now
	}
	for range 3 { // an id taken already: another
		id, secret := randomToken(6), randomToken(16)
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-" + id, Namespace: TokenNamespace,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "gridweave"}},
			Type: corev1.SecretTypeBootstrapToken,
			StringData: map[string]string{
				"token-id":                       id,
				"token-secret":                   secret,
				"expiration":                     now().Add(ttl).UTC().Format(time.RFC3339),
				"usage-bootstrap-authentication": "true",
				"auth-extra-groups":              BootstrapGroup + "," + NodeGroup(hostname, binding),
				"description":                    "Gridweave: the kubelet of " + hostname + " joins",
			},
		}
		_, err := t.Client.CoreV1().Secrets(TokenNamespace).Create(ctx, s, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("kubeletjoin: make the bootstrap token of %s: %w", hostname, err)
		}
		return id + "." + secret, nil
	}
	return "", fmt.Errorf("kubeletjoin: make the bootstrap token of %s: three ids taken in a row", hostname)
}

// randomToken is n characters of tokenChars, uniformly.
func randomToken(n int) string {
	out := make([]byte, n)
	buf := make([]byte, 1)
	for i := 0; i < n; {
		_, _ = rand.Read(buf)     // crypto/rand.Read never fails
		if b := buf[0]; b < 252 { // 252 = 7 × 36: no bias
			out[i] = tokenChars[int(b)%len(tokenChars)]
			i++
		}
	}
	return string(out)
}
