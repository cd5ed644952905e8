package meshtest

import (
	"context"
	"sync"

	"gridweave.dev/mesh"
	"gridweave.dev/mesh/wgkey"
)

// Op names a Mesh method for an Interceptor.
type Op string

const (
	OpPublicKey  Op = "PublicKey"
	OpUpsertPeer Op = "UpsertPeer"
	OpRemovePeer Op = "RemovePeer"
	OpPeers      Op = "Peers"
)

// Interceptor wraps a Mesh for fault injection: Before runs ahead of every
// call and, if it returns an error, the call fails with it and the inner
// Mesh is not touched. It also counts calls per Op.
type Interceptor struct {
	Inner  mesh.Mesh
	Before func(op Op, key wgkey.Key) error

	mu    sync.Mutex
	calls map[Op]int
}

var _ mesh.Mesh = (*Interceptor)(nil)

// FailNext returns a Before function that fails the next n calls of op with err.
func FailNext(op Op, n int, err error) func(Op, wgkey.Key) error {
	var mu sync.Mutex
	return func(got Op, _ wgkey.Key) error {
		mu.Lock()
		defer mu.Unlock()
		if got != op || n == 0 {
			return nil
		}
		n--
		return err
	}
}

// Calls returns how many times op was called (failed calls included).
func (i *Interceptor) Calls(op Op) int {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.calls[op]
}

func (i *Interceptor) before(op Op, key wgkey.Key) error {
	i.mu.Lock()
	if i.calls == nil {
		i.calls = map[Op]int{}
	}
	i.calls[op]++
	i.mu.Unlock()
	if i.Before != nil {
		return i.Before(op, key)
	}
	return nil
}

// PublicKey implements mesh.Mesh.
func (i *Interceptor) PublicKey(ctx context.Context) (wgkey.Key, error) {
	if err := i.before(OpPublicKey, wgkey.Key{}); err != nil {
		return wgkey.Key{}, err
	}
	return i.Inner.PublicKey(ctx)
}

// UpsertPeer implements mesh.Mesh.
func (i *Interceptor) UpsertPeer(ctx context.Context, p mesh.Peer) error {
	if err := i.before(OpUpsertPeer, p.PublicKey); err != nil {
		return err
	}
	return i.Inner.UpsertPeer(ctx, p)
}

// RemovePeer implements mesh.Mesh.
func (i *Interceptor) RemovePeer(ctx context.Context, key wgkey.Key) error {
	if err := i.before(OpRemovePeer, key); err != nil {
		return err
	}
	return i.Inner.RemovePeer(ctx, key)
}

// Peers implements mesh.Mesh.
func (i *Interceptor) Peers(ctx context.Context) ([]mesh.Peer, error) {
	if err := i.before(OpPeers, wgkey.Key{}); err != nil {
		return nil, err
	}
	return i.Inner.Peers(ctx)
}

// Close implements mesh.Mesh.
func (i *Interceptor) Close() error { return i.Inner.Close() }
