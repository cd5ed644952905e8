package gridweave

import (
	"context"
	"sync"
)

// nodeLocks serialises this server's work on one hostname (validate,
// register, disconnect, leave, the Kubernetes follower, the reaper), so
// that a teardown and a re-join of the same node never interleave their
// ledger, mesh and cluster steps. Work on different hostnames never waits;
// a lock is forgotten when nobody holds or waits for it.
type nodeLocks struct {
	mu    sync.Mutex
	locks map[string]*nodeLock
}

type nodeLock struct {
	token chan struct{}
	users int
}

// lock takes hostname's lock, waiting at most until ctx ends.
func (l *nodeLocks) lock(ctx context.Context, hostname string) (unlock func(), err error) {
	l.mu.Lock()
	if l.locks == nil {
		l.locks = map[string]*nodeLock{}
	}
	k := l.locks[hostname]
	if k == nil {
		k = &nodeLock{token: make(chan struct{}, 1)}
		l.locks[hostname] = k
	}
	k.users++
	l.mu.Unlock()
	leave := func() {
		l.mu.Lock()
		if k.users--; k.users == 0 {
			delete(l.locks, hostname)
		}
		l.mu.Unlock()
	}
	select {
	case k.token <- struct{}{}:
		return func() { <-k.token; leave() }, nil
	case <-ctx.Done():
		leave()
		return nil, ctx.Err()
	}
}
