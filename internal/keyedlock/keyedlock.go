package keyedlock

import (
	"context"
	"sync"
)

// Locks is the set; the zero value is ready to use.
type Locks struct {
	mu    sync.Mutex
	locks map[string]*lock
}

type lock struct {
	token chan struct{} // holds a value while the lock is taken
	users int           // the holder and the waiters; guarded by Locks.mu
}

// Lock takes key's lock, waiting at most until ctx ends, and returns the
// function that releases it.
func (l *Locks) Lock(ctx context.Context, key string) (unlock func(), err error) {
	k, leave := l.join(key)
	select {
	case k.token <- struct{}{}:
		return func() { <-k.token; leave() }, nil
	case <-ctx.Done():
		leave()
		return nil, ctx.Err()
	}
}

// TryLock takes key's lock when it is free, without waiting, and reports
// whether it did; unlock releases it.
func (l *Locks) TryLock(key string) (unlock func(), ok bool) {
	k, leave := l.join(key)
	select {
	case k.token <- struct{}{}:
		return func() { <-k.token; leave() }, true
	default:
		leave()
		return nil, false
	}
}

// join counts a user of key's lock (made when it has none) and returns it
// with the function that counts that user out.
func (l *Locks) join(key string) (*lock, func()) {
	l.mu.Lock()
	if l.locks == nil {
		l.locks = map[string]*lock{}
	}
	k := l.locks[key]
	if k == nil {
		k = &lock{token: make(chan struct{}, 1)}
		l.locks[key] = k
	}
	k.users++
	l.mu.Unlock()
	return k, func() {
		l.mu.Lock()
		if k.users--; k.users == 0 {
			delete(l.locks, key)
		}
		l.mu.Unlock()
	}
}

// Len is the number of keys held or waited for (for tests of the bound).
func (l *Locks) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.locks)
}
