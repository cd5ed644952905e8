package linkbook_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"gridweave.dev/gridweave/linkbook"
	"gridweave.dev/gridweave/linkbook/linkbooktest"
	"gridweave.dev/joinkeys/leaderstore"
)

var credential = leaderstore.Credential([]byte("the replicas' JWT secret"))

func TestMemory(t *testing.T) {
	linkbooktest.Run(t, func(*testing.T) linkbook.Book { return new(linkbook.Memory) })
}

// leader serves a Memory as the leader's Book.
func leader(t *testing.T, leading func() bool) (*linkbook.Memory, *httptest.Server) {
	t.Helper()
	m := new(linkbook.Memory)
	srv := httptest.NewServer(linkbook.Handler(m, linkbook.HandlerOptions{Credential: credential, Leading: leading}))
	t.Cleanup(srv.Close)
	return m, srv
}

func follower(t *testing.T, url string) *linkbook.Follower {
	t.Helper()
	f, err := linkbook.NewFollower(new(linkbook.Memory), linkbook.FollowerOptions{
		Leader: func(context.Context, bool) (leaderstore.Target, error) {
			return leaderstore.Target{URL: url}, nil
		},
		Credential: credential, MaxAge: time.Millisecond, Wait: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestAFollowerUsesTheLeadersBook: the suite passes through the channel,
// and what one follower put, another reads.
func TestAFollowerUsesTheLeadersBook(t *testing.T) {
	linkbooktest.Run(t, func(t *testing.T) linkbook.Book {
		_, srv := leader(t, func() bool { return true })
		return follower(t, srv.URL)
	})
	m, srv := leader(t, func() bool { return true })
	a, b := follower(t, srv.URL), follower(t, srv.URL)
	ctx := context.Background()
	if err := a.Put(ctx, "gpu-1", linkbook.Report{ListenPort: 51820}); err != nil {
		t.Fatal(err)
	}
	if r, ok, err := b.Get(ctx, "gpu-1"); err != nil || !ok || r.ListenPort != 51820 {
		t.Errorf("another follower reads %+v %v %v", r, ok, err)
	}
	if r, ok, _ := m.Get(ctx, "gpu-1"); !ok || r.ListenPort != 51820 {
		t.Errorf("the leader's book holds %+v %v", r, ok)
	}
}

// TestALeaderUsesItsOwnBook: while this replica leads, its Memory.
func TestALeaderUsesItsOwnBook(t *testing.T) {
	linkbooktest.Run(t, func(t *testing.T) linkbook.Book {
		f, err := linkbook.NewFollower(new(linkbook.Memory), linkbook.FollowerOptions{
			Leader: func(context.Context, bool) (leaderstore.Target, error) { return leaderstore.Target{Self: true}, nil },
		})
		if err != nil {
			t.Fatal(err)
		}
		return f
	})
}

// TestTheChannelIsTheReplicas: no credential, no book; a replica that
// does not lead answers nothing, and the follower says no leader took it.
func TestTheChannelIsTheReplicas(t *testing.T) {
	var leads atomic.Bool
	m, srv := leader(t, leads.Load)
	leads.Store(true)
	resp, err := http.Get(srv.URL + linkbook.PathPrefix + "all")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without the credential: %s, want 401", resp.Status)
	}
	leads.Store(false)
	err = follower(t, srv.URL).Put(context.Background(), "gpu-1", linkbook.Report{})
	if !errors.Is(err, leaderstore.ErrLeaderUnavailable) {
		t.Errorf("a replica that does not lead took a report: %v", err)
	}
	if all, _ := m.All(context.Background()); len(all) != 0 {
		t.Errorf("the book holds %v", all)
	}
}
