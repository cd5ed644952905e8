package dashboard_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"gridweave.dev/rayctl/dashboard"
)

// TestTheTokenStaysWithItsHost: a client with a Ray token does not follow
// a redirect to another host (Go's client would carry the token header
// there); one without a token does.
func TestTheTokenStaysWithItsHost(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		if r.Header.Get("x-ray-authorization") != "" {
			t.Error("the token reached another host")
		}
		_, _ = w.Write([]byte(`[]`))
	}))
	defer other.Close()
	redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusFound)
	}))
	defer redirecting.Close()

	withToken, err := dashboard.New(redirecting.URL, &dashboard.Options{Token: "cluster-token"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := withToken.ListJobs(context.Background()); err == nil || !strings.Contains(err.Error(), "alone") || elsewhere.Load() != 0 {
		t.Errorf("with a token, a redirect to another host: %v (%d requests there)", err, elsewhere.Load())
	}
	without, err := dashboard.New(redirecting.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := without.ListJobs(context.Background()); err != nil || elsewhere.Load() != 1 {
		t.Errorf("without a token the redirect is followed: %v (%d requests there)", err, elsewhere.Load())
	}
}
