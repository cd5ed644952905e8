// Package linkbook keeps what each node's agent last reported of its
// links to the other nodes (package gridweave answers it, counts it and
// builds the peer directory's endpoints from it), so that every replica of
// the master answers the same.
//
// A Book holds the reports. Memory keeps them in this process: a single
// master's, and the leader's with several replicas. A replica that does
// not lead uses a Follower: it hands each report to the leader's Book and
// reads the leader's, over the channel the replicas share (Handler serves
// the leader's Book there, with the replicas' credential, as
// joinkeys/leaderstore serves the ledger's writes); while it leads it uses
// its own Memory.
//
//	book, err := linkbook.NewFollower(memory, linkbook.FollowerOptions{
//		Leader: replica.Leader, Client: pinnedClient, Credential: credential,
//	})
//
// linkbooktest.Run is the suite every Book passes.
package linkbook
