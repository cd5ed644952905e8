// Package lease runs work that must be single among replicas: Run
// competes for a Kubernetes Lease and, while it holds it, runs the work
// it was given; when the Lease is lost the work's context ends, and Run
// returns once the work has returned.
//
//	err := lease.Run(ctx, lease.Options{Client: kube.CoordinationV1(),
//		Namespace: "gridweave-system", Name: "gridweave-leader",
//		Identity: podName, Duration: 15 * time.Second},
//		func(ctx context.Context) error { return leadUntil(ctx) })
//
// When ctx ends the work's context ends too, and Run keeps renewing the
// Lease until the work has returned, however long it takes to stop; then
// it gives the Lease up, so another replica takes over at once and never
// beside the work, and returns the work's error (nil for work that simply
// stopped). Work that stopped with some of its effects still under way
// says so with ErrUnfinished: the Lease is then kept until it expires, so
// that a successor starts a whole duration after the last renewal. Run
// returns an error wrapping ErrLost when the Lease was lost while leading
// (a replica then stops and competes again with a fresh start), and the
// work's own error when the work stopped on its own (it gives the Lease
// up).
//
// A lost Lease is the one case where two candidates' work may overlap:
// the Lease is lost when its holder could not renew it for two thirds of
// its duration, and another takes it once it expired, whether or not the
// old holder's work has noticed its context end. Work that must never
// overlap (writes to shared state) needs a fence of its own.
package lease
