// Package kubestore is a joinkeys.Store on the Kubernetes API: the ledger
// lives in the etcd of the cluster it serves, so that several servers can
// share it and none of them holds it alone.
//
// Objects (group ledger.gridweave.dev, version v1, all in one namespace):
//
//   - JoinKey, named by the key's ID: the key's description, use count and
//     the SHA-256 of an org key's secret;
//   - LedgerNode, named by the hostname: the node, with the SHA-256 of its
//     node token and its newest audit events (up to 16), labelled with its
//     public key (base32) so that a reader finds a node by its key with
//     one list;
//   - LedgerEvent, a batch of audit events (up to 256): those of no node,
//     and those moved from their node;
//   - LedgerClaim ip.<address>, one per released address at rest: the
//     address is not handed out again until a reservation's
//     ReleasedBefore is past its release.
//
// One Store writes a namespace's ledger; any number read it. The writer
// loads the whole ledger into an index on its first write (or Reload)
// and decides there what must be unique: hostnames, public keys and VPN
// addresses, and pod CIDRs that must not overlap. A reservation holds its
// hostname, key, address and pod CIDR in the index, spends the key's use
// (a compare-and-swap of the JoinKey) and commits by creating the node;
// an error before the commit gives the held parts and the use back. A
// creation whose outcome is unknown (no answer, an internal error of the
// API server) keeps them held, so that no other reservation takes them,
// and reads the node until it knows: one that landed is the
// reservation's answer, one that did not is given back once it can no
// longer land (two minutes after it was sent). Every update is a compare-and-swap on the
// object's resourceVersion, and a node is deleted under it. The writer
// answers reads from its index (a key or node a write of unknown outcome
// may have changed is read from the API server until it is known); a
// reader (a replica that does not lead) reads the API server: keys and nodes fresh, a node by its public key
// from the API server's watch cache (the writer refuses what a stale
// answer there lets through). A writer that hands over stops writing and
// waits for its writes under way (StopWriting).
//
// A node's revision is its resourceVersion, an etcd revision: it
// increases with every write anywhere in the cluster and is never reused,
// so a write based on a stale read (also of a released node whose
// hostname was taken again) is refused with ErrNodeChanged.
//
// A node's own audit events (its reservation's, its updates') are
// written in the node, by the write they record: a join's two events cost
// no request of their own and are never written apart from their write.
// A node carries its newest 16: an update that would carry more first
// moves the oldest to the trail, and a release moves them all there
// before the node goes. Other events (keys minted and revoked, rejected
// attempts, releases) are written to the trail in batches, each event
// before its write answers: while one batch is being created the events
// of concurrent writes gather for the next, so under load a create
// carries many, and a lone event costs one request. An event's ID is the
// resourceVersion of the object it was first written in times 1024 plus
// its place there; it keeps that ID wherever it goes (written in the
// event once it moves, or once its node or batch is written again), and
// an event moved twice (a move whose node write failed) is read once.
// Edit no LedgerEvent or LedgerNode by hand: an update changes the
// resourceVersion the IDs of events not yet written with theirs are
// counted from, and a node deleted by hand takes its events with it. A query reads the nodes' events (from the writer's index,
// or from the API server) and the trail's, and selects in the store, since
// a batch mixes types, hostnames and keys; a prune bounds them together,
// writing a node again without the events it does not keep (a write like
// any other: the node's revision moves on). A LedgerNode
// CRD of an earlier version drops the events a node carries: the writer
// sees it in the API server's answer and writes them to the trail, as
// it did then. In that case a write killed after the node's creation can
// lose its audit event, and when a reservation's event cannot be written,
// its node is removed again and its use given back, so that its error
// means nothing was written; when that removal fails too (and for an
// update of a node), the error says the write stays.
//
// A ledger written before the one writer (a LedgerClaim per live node's
// address and public key, a PodCIDRTable) is brought up to date when a
// writer first loads it: those objects are removed and the nodes
// labelled; claims of resting addresses stay.
//
// One writer: replicas that share a ledger let only their leader write it
// (joinkeys/leaderstore), and the API server holds them to it. Each Store
// signs what it creates or updates with Options.Writer
// (WriterAnnotation), and InstallFence binds FencePolicy, a
// ValidatingAdmissionPolicy that refuses a signature other than the
// holder of the replicas' Lease: a deposed leader's create or update
// fails with joinkeys.ErrFenced and writes nothing. It deletes an object
// by marking it first (DeletingAnnotation, an update), then deleting it as
// marked: the policy refuses that delete unless the replica that marked it
// holds the Lease, so a takeover between the two fences it too (an
// unmarked object's delete, an administrator's, is not fenced). A mark
// left by a refused delete is cleared by the next writer as it loads. AwaitWrites waits until a new
// holder's writes are taken.
//
// The CRDs are embedded (CRDs, InstallCRDs; PodCIDRTable only to remove
// an old ledger's). The store needs, in its namespace: get, list, create,
// update and delete on LedgerNodes and LedgerClaims; list, create, update
// and delete on LedgerEvents; get, list, create and update on JoinKeys;
// delete on PodCIDRTables (deploy/kubernetes/ha/rbac-ha.yaml grants
// exactly that). Keep the CRDs of this version when rolling the server
// back: the API server drops the fields a CRD does not know from what it
// stores and from what it reads back, so a LedgerNode CRD of an earlier
// version erases the events nodes carry as they are written again.
package kubestore
