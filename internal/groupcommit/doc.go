// Package groupcommit shares one write among concurrent callers: a call
// queues its item under a key and waits; one goroutine per key writes the
// queued items in batches, each batch in one write, and hands every caller
// its own result. While a batch is being written the next one gathers, so a
// lone call costs the one write it always did and many calls at once cost
// few. Nothing waits for a timer, and a key's goroutine ends when its queue
// is empty. A panic of a write is raised again in each of its callers.
//
// kubestore batches its audit events and a join key's uses with it, and
// sqlitestore its write transactions.
package groupcommit
