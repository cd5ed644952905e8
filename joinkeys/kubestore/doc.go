// Package kubestore is a joinkeys.Store on the Kubernetes API: the ledger
// lives in the etcd of the cluster it serves, so that several servers can
// share it and none of them holds it alone.
//
// Objects (group ledger.gridweave.dev, version v1, all in one namespace):
//
//   - JoinKey, named by the key's ID: the key's description, use count and
//     the SHA-256 of an org key's secret;
//   - LedgerNode, named by the hostname: the node, with the SHA-256 of its
//     node token;
//   - LedgerClaim, one per unique thing a node holds: ip.<address> for its
//     VPN address and key.<hex> for its WireGuard public key;
//   - LedgerEvent, one per audit event;
//   - PodCIDRTable pod-cidrs: every node's pod CIDR, in one object.
//
// Uniqueness is the API server's: a node takes its hostname, address and
// public key by creating the object named by it, so AlreadyExists means
// taken, as the API server's own Service IP allocator does with IPAddress
// objects. Pod CIDRs must not overlap rather than be unequal; they are
// entered in the one table under its resourceVersion.
//
// Every change of an object is a compare-and-swap on its resourceVersion.
// A node's revision is its resourceVersion, an etcd revision: it increases
// with every write anywhere in the cluster and is never reused, so a write
// based on a stale read (also of a released node whose hostname was taken
// again) is refused with ErrNodeChanged. An audit event's ID is the
// resourceVersion it was created at.
//
// There are no transactions across objects. A reservation takes its parts
// in one order — the public key's claim, the pod CIDR's entry, the
// address's claim, the key's use — and commits by creating the node; an
// error gives the parts back in the reverse order, which is also the order
// a release gives them back in. A server killed in the middle of a
// reservation (or a release) leaves claims without a node: they block
// nothing for long, because a claim or pod CIDR entry that no node holds
// is removed when it is in the way and older than Options.StaleClaimAge
// (a public key's or a pod CIDR's at once, an address's when the range
// looks full). A kill between the key's use and the node's creation loses
// that one use of the key (never grants one more), and a kill after the
// commit can lose the audit event of the write. Once the node exists, an
// error (its audit event failed) gives nothing back.
//
// One writer: replicas that share a ledger let only their leader write it
// (joinkeys/leaderstore), and the API server holds them to it. Each Store
// signs what it creates or updates with Options.Writer
// (WriterAnnotation), and InstallFence binds FencePolicy, a
// ValidatingAdmissionPolicy that refuses a signature other than the
// holder of the replicas' Lease: a deposed leader's write fails with
// joinkeys.ErrFenced and writes nothing. AwaitWrites waits until a new
// holder's writes are taken.
//
// The CRDs are embedded (CRDs, InstallCRDs). The store needs, in its
// namespace, get, list, create, update and delete on the five resources.
package kubestore
