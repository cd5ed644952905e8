package kubestore

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"gridweave.dev/joinkeys"
)

// The audit trail is written in batches: a LedgerEvent holds up to
// maxEventsPerBatch events. An event is written before its write answers
// (an acknowledged event is never lost), and the writes of concurrent
// callers share one request: while a batch is being written the next one
// gathers, so under load one create carries the events of many joins and
// a lone event costs the one request it always did.

// maxEventsPerBatch bounds the events of one LedgerEvent (the CRD's
// maxItems); 1<<idShift must exceed it.
const maxEventsPerBatch = 256

// A node's own events (a reservation's, an update's) are written in the
// node, by the write they record: they cost no request of their own and
// are never written apart from their write. A node carries its newest
// maxCarriedEvents; an update that would carry more first moves the
// oldest to the trail, and a release moves them all before the node
// goes. An event keeps its ID wherever it moves.

// maxCarriedEvents bounds the events a LedgerNode carries (the CRD's
// maxItems); at most maxEventsPerBatch.
const maxCarriedEvents = 16

// entryOf is e as stored, without an ID (its write gives it one).
func entryOf(e joinkeys.AuditEvent) eventEntry {
	return eventEntry{At: e.At, Type: e.Type, KeyID: e.KeyID, Hostname: e.Hostname, Actor: e.Actor, Reason: e.Reason}
}

// eventOf is a stored entry with its ID as an event.
func eventOf(e eventEntry) joinkeys.AuditEvent {
	return joinkeys.AuditEvent{ID: e.ID, At: e.At, Type: e.Type, KeyID: e.KeyID, Hostname: e.Hostname, Actor: e.Actor, Reason: e.Reason}
}

// idShift makes room in an event's ID for its place in its batch: the ID
// is the batch's resourceVersion shifted by idShift, plus the place.
const idShift = 10

// AppendAudit implements joinkeys.Store.
func (s *Store) AppendAudit(ctx context.Context, e joinkeys.AuditEvent) error {
	end, err := s.beginWrite()
	if err != nil {
		return err
	}
	defer end()
	return s.appendAudit(ctx, e)
}

// appendAudit queues e for the next batch and waits until the batch is
// written (or refused), even when ctx ends first: the event may be
// written by then, and its caller is told what happened to it.
func (s *Store) appendAudit(_ context.Context, e joinkeys.AuditEvent) (err error) {
	defer func() {
		// A panic of the shared write is this event's error.
		if p := recover(); p != nil {
			err = fmt.Errorf("kubestore: writing an audit event: %v", p)
		}
	}()
	return s.audit.Do(struct{}{}, e)
}

// writeAudit writes one batch of events (auditBatcher's Write).
func (s *Store) writeAudit(_ struct{}, events []joinkeys.AuditEvent) []error {
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	err := s.writeBatch(ctx, events)
	out := make([]error, len(events))
	for i := range out {
		out[i] = err
	}
	return out
}

// writeBatch writes events (at most maxEventsPerBatch) as one LedgerEvent.
func (s *Store) writeBatch(ctx context.Context, events []joinkeys.AuditEvent) error {
	entries := make([]eventEntry, len(events))
	for i, e := range events {
		entries[i] = entryOf(e)
	}
	return s.writeEntries(ctx, entries)
}

// writeEntries writes entries (at most maxEventsPerBatch, those with an
// ID keeping it) as one LedgerEvent.
func (s *Store) writeEntries(ctx context.Context, entries []eventEntry) error {
	newest := time.Time{}
	for _, e := range entries {
		if e.At.After(newest) {
			newest = e.At
		}
	}
	_, err := s.events.create(ctx, s.events.new(eventName(s.eventTime(newest)), nil, eventSpec{Events: entries}))
	return err
}

// appendTrail writes events in order, a full batch per request (Import).
func (s *Store) appendTrail(ctx context.Context, events []joinkeys.AuditEvent) error {
	for batch := range slices.Chunk(events, maxEventsPerBatch) {
		if err := s.writeBatch(ctx, batch); err != nil {
			return err
		}
	}
	return nil
}

// eventTime is the time an event's name carries: at, or just after the
// last this Store named when that is later (a clock that did not move, or
// moved back), so that this Store's names sort in the order it wrote them.
func (s *Store) eventTime(at time.Time) int64 {
	for {
		last := s.lastEvent.Load()
		next := max(at.UnixNano(), last+1)
		if s.lastEvent.CompareAndSwap(last, next) {
			return next
		}
	}
}

// eventName names a LedgerEvent whose newest event was made at at
// (nanoseconds) so that names sort newest first (the time counted down
// from the largest 63-bit nanosecond count), then at random: the API
// server lists in name order, so the newest events are read without
// reading the others. Events named before this scheme (ev-<random hex>)
// sort after every such name (ea- < ev-). Several replicas name events by
// their own clocks: skew between them orders their events by those
// clocks.
func eventName(at int64) string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return fmt.Sprintf("ea-%019d-%s", math.MaxInt64-at, hex.EncodeToString(b))
}

// timeSorted reports whether an event's name is eventName's (ea-, 19
// digits, -, 6 hex), not the random one events had before.
func timeSorted(name string) bool {
	if len(name) != 3+19+1+6 || name[:3] != "ea-" || name[22] != '-' {
		return false
	}
	for _, c := range name[3:22] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// storedEvents are the events of one LedgerEvent with their IDs: a
// batch's, or the one event an object held alone.
func storedEvents(o object[eventSpec]) ([]joinkeys.AuditEvent, error) {
	rv, err := o.Metadata.revision()
	if err != nil {
		return nil, err
	}
	sp := o.Spec
	entries := sp.Events
	if len(entries) == 0 && sp.At != nil {
		entries = []eventEntry{{At: *sp.At, Type: sp.Type, KeyID: sp.KeyID, Hostname: sp.Hostname, Actor: sp.Actor, Reason: sp.Reason}}
	}
	out := make([]joinkeys.AuditEvent, len(entries))
	for i, e := range entries {
		id := e.ID
		if id == 0 {
			id = rv<<idShift | int64(i)
		}
		e.ID = id
		out[i] = eventOf(e)
	}
	return out, nil
}

// nodesEvents are the events the ledger's nodes carry (only hostname's
// when it is not empty), by hostname: from the index of a Store that
// writes, else read from the API server.
func (s *Store) nodesEvents(ctx context.Context, hostname string) (map[string][]joinkeys.AuditEvent, error) {
	out := map[string][]joinkeys.AuditEvent{}
	carry := func(o object[nodeSpec]) {
		for _, e := range o.Spec.Events {
			out[o.Metadata.Name] = append(out[o.Metadata.Name], eventOf(e))
		}
	}
	if ix := s.loaded(); ix != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		if hostname != "" {
			if o, ok := ix.nodes[hostname]; ok {
				carry(o)
			}
			return out, nil
		}
		for _, o := range ix.nodes {
			carry(o)
		}
		return out, nil
	}
	if hostname != "" {
		o, err := s.nodes.get(ctx, hostname)
		switch {
		case apierrors.IsNotFound(err):
			return out, nil
		case err != nil:
			return nil, err
		}
		carry(o)
		return out, nil
	}
	err := s.nodes.each(ctx, "", func(o object[nodeSpec]) bool {
		carry(o)
		return true
	})
	return out, err
}

// keepDropped writes to the trail the events sent in a node's write that
// the API server did not keep (a LedgerNode CRD of an earlier version
// drops them all), each with its ID (one without gets its batch's).
func (s *Store) keepDropped(ctx context.Context, sent []eventEntry, written object[nodeSpec]) error {
	if len(sent) == 0 || len(written.Spec.Events) > 0 {
		return nil
	}
	for batch := range slices.Chunk(sent, maxEventsPerBatch) {
		if err := s.writeEntries(ctx, batch); err != nil {
			return fmt.Errorf("kubestore: node %s written, but the LedgerNode CRD dropped its audit events and writing them to the trail failed: %w", written.Metadata.Name, err)
		}
	}
	return nil
}

// byID sorts events by ID, an event held twice (moved to the trail by a
// write whose node write did not follow) once.
func byID(events []joinkeys.AuditEvent) []joinkeys.AuditEvent {
	slices.SortFunc(events, func(a, b joinkeys.AuditEvent) int { return cmp.Compare(a.ID, b.ID) })
	return slices.CompactFunc(events, func(a, b joinkeys.AuditEvent) bool { return a.ID == b.ID })
}

// selects reports whether q selects e (Limit aside).
func selects(q joinkeys.AuditQuery, e joinkeys.AuditEvent) bool {
	return (q.Type == "" || e.Type == q.Type) && (q.Hostname == "" || e.Hostname == q.Hostname) && (q.KeyID == "" || e.KeyID == q.KeyID)
}

// Audit implements joinkeys.Store: the nodes' events and the trail's. The
// query selects here, as batches mix types, hostnames and keys; with a
// Limit, the trail's batches are read newest first and no more pages than
// the limit needs (every node's events are read, or the one node's of a
// query by hostname).
func (s *Store) Audit(ctx context.Context, q joinkeys.AuditQuery) ([]joinkeys.AuditEvent, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	// The nodes first: an event a release moves to the trail meanwhile is
	// read in the trail.
	carried, err := s.nodesEvents(ctx, q.Hostname)
	if err != nil {
		return nil, err
	}
	size := listPageSize
	if q.Limit > 0 {
		size = min(q.Limit, listPageSize)
	}
	var out []joinkeys.AuditEvent
	for _, events := range carried {
		for _, e := range events {
			if selects(q, e) {
				out = append(out, e)
			}
		}
	}
	var decodeErr error
	sorted := 0 // events selected from objects of time-sorted names
	err = s.events.eachPaged(ctx, "", size, func(o object[eventSpec]) bool {
		events, err := storedEvents(o)
		if err != nil {
			decodeErr = err
			return false
		}
		for i, e := range events {
			if !selects(q, e) {
				continue
			}
			out = append(out, e)
			// Once the limit's newest are read under time-sorted names,
			// the rest are older: those names sort newest first, and an
			// event named before that scheme is older than all of them.
			// An event written with its ID was first written elsewhere
			// (moved from its node, or read twice) and tells nothing of
			// the batches after this one.
			if timeSorted(o.Metadata.Name) && (i >= len(o.Spec.Events) || o.Spec.Events[i].ID == 0) {
				sorted++
			}
		}
		return q.Limit <= 0 || sorted < q.Limit
	})
	if err := cmp.Or(err, decodeErr); err != nil {
		return nil, err
	}
	out = byID(out)
	if q.Limit > 0 && len(out) > q.Limit {
		out = out[len(out)-q.Limit:]
	}
	return out, nil
}

// PruneAudit implements joinkeys.Store: it reads the trail (bounded by
// the retention it keeps) and the nodes' events, deletes each LedgerEvent
// none of whose events it keeps, rewrites each that keeps some, each kept
// event with its ID, and rewrites each node that carries an event it does
// not keep.
func (s *Store) PruneAudit(ctx context.Context, r joinkeys.AuditRetention, now time.Time) (int, error) {
	end, err := s.beginWrite()
	if err != nil {
		return 0, err
	}
	defer end()
	type stored struct {
		object[eventSpec]
		events []joinkeys.AuditEvent
	}
	var all []stored
	var trail []joinkeys.AuditEvent
	var decodeErr error
	err = s.events.each(ctx, "", func(o object[eventSpec]) bool {
		events, err := storedEvents(o)
		if err != nil {
			decodeErr = err
			return false
		}
		if len(events) > 0 {
			all = append(all, stored{o, events})
			trail = append(trail, events...)
		}
		return true
	})
	if err := cmp.Or(err, decodeErr); err != nil {
		return 0, err
	}
	carried, err := s.nodesEvents(ctx, "")
	if err != nil {
		return 0, err
	}
	for _, events := range carried {
		trail = append(trail, events...)
	}
	kept := map[int64]bool{}
	for _, e := range joinkeys.Retained(byID(trail), r, now) {
		kept[e.ID] = true
	}
	removed := map[int64]bool{}
	// Oldest first, so that a prune cut short by its bound removed the
	// oldest.
	slices.SortFunc(all, func(a, b stored) int { return cmp.Compare(a.events[0].ID, b.events[0].ID) })
	for _, o := range all {
		if len(removed) >= maxPrunedPerCall {
			return len(removed), nil // the rest at the next call: a backlog never stalls the caller
		}
		// Each event written with its ID: a batch rewritten, or marked
		// for its deletion (an update), keeps its events' IDs.
		var keep, all []eventEntry
		var dropped []int64
		for _, e := range o.events {
			entry := entryOf(e)
			entry.ID = e.ID
			all = append(all, entry)
			if kept[e.ID] {
				keep = append(keep, entry)
			} else {
				dropped = append(dropped, e.ID)
			}
		}
		unmarked, wasMarked := withoutOthersMark(o.object, s.writer)
		switch len(keep) {
		case len(o.events):
			if !wasMarked {
				continue
			}
			// Kept, and marked by a delete that failed: the mark goes.
			unmarked.Spec = eventSpec{Events: keep}
			_, err = s.events.update(ctx, unmarked)
		case 0:
			unmarked.Spec = eventSpec{Events: all}
			_, err = s.events.removeSigned(ctx, unmarked)
		default:
			unmarked.Spec = eventSpec{Events: keep}
			_, err = s.events.update(ctx, unmarked)
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return len(removed), err
		}
		for _, id := range dropped {
			removed[id] = true
		}
	}
	for _, hostname := range slices.Sorted(maps.Keys(carried)) {
		if len(removed) >= maxPrunedPerCall {
			break
		}
		drop := map[int64]bool{}
		for _, e := range carried[hostname] {
			if !kept[e.ID] {
				drop[e.ID] = true
			}
		}
		if len(drop) == 0 {
			continue
		}
		dropped, err := s.dropEvents(ctx, hostname, drop)
		if err != nil {
			return len(removed), err
		}
		for _, id := range dropped {
			removed[id] = true
		}
	}
	return len(removed), nil
}

// dropEvents writes hostname's node again without the events of drop
// (the prune's choice among those it read: an event written since is
// kept), and returns the IDs it dropped; a node written since the prune
// read it (or gone) is left to the next prune.
func (s *Store) dropEvents(ctx context.Context, hostname string, drop map[int64]bool) ([]int64, error) {
	ix, done, err := s.beginNodeWrite(ctx, hostname)
	if err != nil {
		return nil, err
	}
	defer done()
	s.mu.Lock()
	cur, ok := ix.nodes[hostname]
	s.mu.Unlock()
	if cur.Spec.Status == joinkeys.StatusValidated {
		// A join under way, or half finished: its revision is what the
		// register, or the release of a half-finished join, is based on.
		// Its events go when it registers or leaves.
		return nil, nil
	}
	var keep []eventEntry
	var dropped []int64
	for _, e := range cur.Spec.Events {
		if drop[e.ID] {
			dropped = append(dropped, e.ID)
		} else {
			keep = append(keep, e)
		}
	}
	if !ok || len(dropped) == 0 {
		return nil, nil
	}
	cur.Spec.Events = keep
	written, err := s.writeNode(ctx, cur)
	switch {
	case err == nil:
		s.mu.Lock()
		ix.nodes[hostname] = written
		delete(ix.unsureNodes, hostname)
		delete(ix.restIfGone, hostname)
		s.mu.Unlock()
		return dropped, s.keepDropped(ctx, keep, written)
	case apierrors.IsNotFound(err):
		s.forgetNode(ix, hostname)
		return nil, nil
	case apierrors.IsConflict(err):
		s.refreshNode(ctx, ix, hostname)
		return nil, nil
	}
	s.refreshNode(ctx, ix, hostname) // perhaps written
	return nil, err
}

// maxPrunedPerCall bounds the events one PruneAudit removes (it stops
// after the batch or node that reaches it).
const maxPrunedPerCall = 1000
