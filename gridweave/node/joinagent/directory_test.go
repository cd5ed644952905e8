package joinagent

import (
	"slices"
	"testing"

	"gridweave.dev/gridweave/api"
)

// TestHeldDirectoryAppliesDeltas: a whole directory replaces what the
// agent holds, a delta changes the peers it names and removes those gone.
func TestHeldDirectoryAppliesDeltas(t *testing.T) {
	peer := func(host, endpoint string) api.DirectoryPeer {
		return api.DirectoryPeer{Hostname: host, PublicKey: host + "-key", Endpoints: []string{endpoint}}
	}
	steps := []struct {
		name string
		dir  api.PeerDirectory
		want []api.DirectoryPeer
	}{
		{"the whole directory", api.PeerDirectory{Peers: []api.DirectoryPeer{peer("b", "2"), peer("a", "1")}},
			[]api.DirectoryPeer{peer("a", "1"), peer("b", "2")}},
		{"a join", api.PeerDirectory{Delta: true, Peers: []api.DirectoryPeer{peer("c", "3")}},
			[]api.DirectoryPeer{peer("a", "1"), peer("b", "2"), peer("c", "3")}},
		{"a move and a leave", api.PeerDirectory{Delta: true, Peers: []api.DirectoryPeer{peer("a", "9")}, Removed: []string{"b"}},
			[]api.DirectoryPeer{peer("a", "9"), peer("c", "3")}},
		{"no change", api.PeerDirectory{Delta: true},
			[]api.DirectoryPeer{peer("a", "9"), peer("c", "3")}},
		{"the whole directory again", api.PeerDirectory{Peers: []api.DirectoryPeer{peer("d", "4")}},
			[]api.DirectoryPeer{peer("d", "4")}},
	}
	var held heldDirectory
	for _, step := range steps {
		got := held.apply(step.dir)
		if !slices.EqualFunc(got, step.want, func(a, b api.DirectoryPeer) bool {
			return a.Hostname == b.Hostname && slices.Equal(a.Endpoints, b.Endpoints)
		}) {
			t.Errorf("%s: the agent holds %+v, want %+v", step.name, got, step.want)
		}
	}
}
