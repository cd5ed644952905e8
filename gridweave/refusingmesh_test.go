package gridweave_test

import (
	"context"
	"errors"
	"sync/atomic"

	"gridweave.dev/mesh"
	"gridweave.dev/mesh/memmesh"
	"gridweave.dev/mesh/wgkey"
)

// refusingMesh is a memmesh whose upserts fail while refuse is set.
type refusingMesh struct {
	*memmesh.Mesh
	refuse atomic.Bool
}

func newRefusingMesh(pub wgkey.Key) *refusingMesh { return &refusingMesh{Mesh: memmesh.New(pub)} }

func (m *refusingMesh) UpsertPeer(ctx context.Context, p mesh.Peer) error {
	if m.refuse.Load() {
		return errors.New("device refused the configuration")
	}
	return m.Mesh.UpsertPeer(ctx, p)
}
