package testcluster

import (
	"net/http"
	"sync/atomic"
)

// RequestCounter counts the requests sent to the API server by every
// client made from a rest.Config whose WrapTransport is its Wrap.
type RequestCounter struct {
	calls atomic.Int64
}

// Wrap is a rest.Config's WrapTransport: each transport the config makes
// counts into c.
func (c *RequestCounter) Wrap(next http.RoundTripper) http.RoundTripper {
	return &countedRoundTripper{calls: &c.calls, next: next}
}

// Count is the number of requests sent so far.
func (c *RequestCounter) Count() int64 { return c.calls.Load() }

type countedRoundTripper struct {
	calls *atomic.Int64
	next  http.RoundTripper
}

func (c *countedRoundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	c.calls.Add(1)
	return c.next.RoundTrip(r)
}
