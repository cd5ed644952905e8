package master

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"gridweave.dev/gridweave"
	"gridweave.dev/gridweave/identity"
	"gridweave.dev/gridweave/tlspin"
)

// TestTheChannelIsPinnedTLS: the replicas' channel is TLS with the public
// listener's TLS off too, pinned to a key derived from the shared secret:
// a replica reaches a leader of the same secret, never sends a request to
// a server of another key, and refuses a hub ConfigMap that names a
// channel in clear, so that whoever may write that ConfigMap does not get
// the replicas' credential. With TLS on, replicas of the earlier version
// (which pin the public listener's key, and ask for no name) and of this
// one still reach each other.
func TestTheChannelIsPinnedTLS(t *testing.T) {
	const secret = "the secret every replica shares, long enough to pass"
	plain := gridweave.Config{JWTSecret: secret}
	leader, err := openChannel(plain, nil)
	if err != nil {
		t.Fatal(err)
	}
	follower, err := openChannel(plain, nil)
	if err != nil {
		t.Fatal(err)
	}
	var answered atomic.Int32
	serve := func(cfg *tls.Config) *httptest.Server {
		s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			answered.Add(1)
		}))
		s.TLS = cfg
		if cfg != nil {
			s.StartTLS()
		} else {
			s.Start()
		}
		t.Cleanup(s.Close)
		return s
	}
	get := func(c replicaChannel, url string) error {
		resp, err := c.client.Get(url)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}

	if err := get(follower, serve(leader.serverTLS).URL); err != nil {
		t.Fatalf("a replica of the same secret over the channel, TLS off: %v", err)
	}
	other, err := openChannel(gridweave.Config{JWTSecret: "another secret, of another master altogether"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	before := answered.Load()
	if err := get(follower, serve(other.serverTLS).URL); !errors.Is(err, tlspin.ErrPinMismatch) {
		t.Errorf("a channel of another secret: %v; want %v", err, tlspin.ErrPinMismatch)
	}
	if err := get(follower, serve(&tls.Config{}).URL); !errors.Is(err, tlspin.ErrPinMismatch) { // httptest's own certificate
		t.Errorf("a channel of another key: %v; want %v", err, tlspin.ErrPinMismatch)
	}
	if n := answered.Load() - before; n != 0 {
		t.Errorf("servers of other keys were sent %d requests", n)
	}

	// A hub ConfigMap naming a channel in clear is refused.
	clear := serve(nil)
	for _, channel := range []string{clear.URL, strings.Replace(clear.URL, "http://", "", 1), "https://"} {
		kube := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: HubConfigMap, Namespace: "system"},
			Data: map[string]string{"leader": "replica-0", "replica": channel}})
		r := &replica{identity: "replica-1", namespace: "system", kube: kube}
		if target, err := r.Leader(context.Background(), true); !errors.Is(err, errChannelRefused) {
			t.Errorf("the hub names the channel %q: leader %+v, %v; want %v", channel, target, err, errChannelRefused)
		}
	}

	// TLS on: the public listener's pair, as an earlier version's leader
	// serves the channel, and an earlier version's replica (no name asked,
	// the public key pinned).
	public := serve(&tls.Config{}) // httptest's own certificate
	publicTLS := &tls.Config{Certificates: public.TLS.Certificates}
	withTLS := gridweave.Config{JWTSecret: secret, PublicPin: tlspin.Of(public.Certificate()).String()}
	newer, err := openChannel(withTLS, publicTLS)
	if err != nil {
		t.Fatal(err)
	}
	if err := get(newer, public.URL); err != nil {
		t.Errorf("a leader of the earlier version, TLS on: %v", err)
	}
	earlier := &http.Client{Transport: &http.Transport{TLSClientConfig: tlspin.ClientConfig(tlspin.Of(public.Certificate()))}}
	resp, err := earlier.Get(serve(newer.serverTLS).URL)
	if err != nil {
		t.Fatalf("a replica of the earlier version, TLS on: %v", err)
	}
	resp.Body.Close()
	// A replica of this version asks for the channel's pair by name and
	// gets it: a client that pins that key alone is answered.
	_, channelPin, err := identity.ChannelPair(secret)
	if err != nil {
		t.Fatal(err)
	}
	channelOnly := tlspin.ClientConfig(channelPin)
	channelOnly.ServerName = identity.ChannelServerName
	resp, err = (&http.Client{Transport: &http.Transport{TLSClientConfig: channelOnly}}).Get(serve(newer.serverTLS).URL)
	if err != nil {
		t.Fatalf("a replica of this version, TLS on, pinning the channel's key alone: %v", err)
	}
	resp.Body.Close()
}
