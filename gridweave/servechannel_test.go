package gridweave_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gridweave.dev/gridweave"
	"gridweave.dev/joinkeys/leaderstore"
	"gridweave.dev/rayctl/rayctltest"
)

// TestServeWritesGoThroughTheLeader: with two replicas, removing one
// Serve application through each at once keeps both removals (the
// leader's dashboard client makes both writes, one after the other,
// where two clients would each put back what the other removed); the
// leader's refusal crosses the channel as its route answers it, and a
// follower the leader does not take answers 502.
func TestServeWritesGoThroughTheLeader(t *testing.T) {
	d := rayctltest.NewDashboard(t, "")
	for _, app := range []string{"a", "b", "c", "d"} {
		d.DeployApp(app, "/"+app, app+":app")
	}
	// A read waits (a while) for another: two clients' reads would both
	// be made before either writes back.
	var arrived sync.WaitGroup
	arrived.Add(2)
	both := make(chan struct{})
	go func() { arrived.Wait(); close(both) }()
	var reads atomic.Int64
	gate := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/api/serve/applications") {
			if reads.Add(1) <= 2 { // the two removals' reads
				arrived.Done()
				select {
				case <-both:
				case <-time.After(300 * time.Millisecond):
				}
			}
		}
		d.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(gate.Close)
	configure := func(c *gridweave.Config) { c.RayDashboardURL, c.InternalToken = gate.URL, internalToken }
	credential := leaderstore.Credential([]byte(testSecret))
	leader := newHarness(t, &harnessOptions{config: configure, serve: &gridweave.ServeChannel{
		Leader: func(context.Context, bool) (leaderstore.Target, error) { return leaderstore.Target{Self: true}, nil }}})
	channel := httptest.NewServer(leader.server.ServeChannelHandler(credential, func() bool { return true }))
	t.Cleanup(channel.Close)
	through := func(cred string) *gridweave.ServeChannel {
		return &gridweave.ServeChannel{Client: http.DefaultClient, Credential: cred,
			Leader: func(context.Context, bool) (leaderstore.Target, error) {
				return leaderstore.Target{URL: channel.URL}, nil
			}}
	}
	follower := newHarness(t, &harnessOptions{config: configure, serve: through(credential)})

	var wg sync.WaitGroup
	for app, h := range map[string]*harness{"a": leader, "b": follower} {
		wg.Go(func() {
			if r := h.do("DELETE", "/v1/ray/serve/applications/"+app, internalToken, nil); r.status != 200 {
				t.Errorf("delete %s: %d %s", app, r.status, r.raw)
			}
		})
	}
	wg.Wait()
	if got := d.Apps(); !slices.Equal(got, []string{"c", "d"}) {
		t.Errorf("after removing a and b through two replicas at once Serve runs %v, want [c d]", got)
	}

	d.MarkImperative("d")
	if r := follower.want(follower.do("DELETE", "/v1/ray/serve/applications/c", internalToken, nil), 409, "the leader's refusal"); r.errorField("code") != "imperative_applications" {
		t.Errorf("the leader's refusal through the follower: %s", r.raw)
	}
	stranger := newHarness(t, &harnessOptions{config: configure, serve: through("not-the-replicas-credential")})
	if r := stranger.want(stranger.do("DELETE", "/v1/ray/serve/applications/c", internalToken, nil), 502, "a replica the leader does not take"); r.errorField("code") != "ray_dashboard_unreachable" {
		t.Errorf("a replica the leader refuses: %s", r.raw)
	}
	if got := d.Apps(); !slices.Equal(got, []string{"c", "d"}) {
		t.Errorf("after refused removals Serve runs %v, want [c d]", got)
	}

	// A leader that takes the delete and does not answer in time: 504,
	// as a dashboard that does not answer.
	silent := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-silent:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(silent) })
	patient := newHarness(t, &harnessOptions{config: func(c *gridweave.Config) {
		configure(c)
		c.RayDashboardTimeout = 100 * time.Millisecond
	}, serve: &gridweave.ServeChannel{Client: http.DefaultClient, Credential: credential,
		Leader: func(context.Context, bool) (leaderstore.Target, error) { return leaderstore.Target{URL: slow.URL}, nil }}})
	if r := patient.want(patient.do("DELETE", "/v1/ray/serve/applications/c", internalToken, nil), 504, "a leader that does not answer"); r.errorField("code") != "ray_dashboard_timeout" {
		t.Errorf("a leader that does not answer: %s", r.raw)
	}
}
