package kubestore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"gridweave.dev/joinkeys"
	"gridweave.dev/joinkeys/kubestore"
)

var ledgerEvents = schema.GroupVersionResource{Group: kubestore.Group, Version: kubestore.Version, Resource: "ledgerevents"}

// trailTransport can cut off a Store's deletes, and hold its first
// creation of a LedgerEvent.
type trailTransport struct {
	next        http.RoundTripper
	failDeletes atomic.Bool
	hold        atomic.Pointer[chan struct{}] // closed to release the held creation
	holding     chan struct{}                 // told when one is held
}

func (tr *trailTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodDelete && tr.failDeletes.Load() {
		return nil, errors.New("cut off")
	}
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/ledgerevents") {
		if release := tr.hold.Swap(nil); release != nil {
			tr.holding <- struct{}{}
			<-*release
		}
	}
	return tr.next.RoundTrip(r)
}

// TestTheTrailIsWrittenInBatches: an imported trail is written in full
// batches; an event written alone, as events were before batches, is read
// beside them; a query selects across batches; a prune whose delete is
// cut off after its mark changes no event's ID; a prune deletes the
// batches it keeps nothing of and rewrites the one it keeps part of, each
// kept event with its ID; events written while a batch is being written
// share the next, each with a new ID after all the others.
func TestTheTrailIsWrittenInBatches(t *testing.T) {
	c, ns := ledger(t)
	ctx := context.Background()
	tr := &trailTransport{holding: make(chan struct{}, 1)}
	cfg := rest.CopyConfig(c.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { tr.next = rt; return tr }
	s, err := kubestore.New(cfg, ns, &kubestore.Options{Writer: "the-writer"})
	if err != nil {
		t.Fatal(err)
	}
	const imported = 600
	began := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var trail []joinkeys.AuditEvent
	for i := range imported {
		trail = append(trail, joinkeys.AuditEvent{At: began.Add(time.Duration(i) * time.Second), Type: joinkeys.EventNodeRegistered, Hostname: fmt.Sprintf("h-%d", i), Actor: "gridweave"})
	}
	if err := s.Import(ctx, joinkeys.Ledger{Audit: trail}); err != nil {
		t.Fatal(err)
	}
	objects := func() map[string]int {
		t.Helper()
		list, err := c.Dynamic.Resource(ledgerEvents).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sizes := map[string]int{}
		for _, o := range list.Items {
			events, _, _ := unstructured.NestedSlice(o.Object, "spec", "events")
			sizes[o.GetName()] = len(events)
		}
		return sizes
	}
	if sizes := slices.Sorted(func(yield func(int) bool) {
		for _, n := range objects() {
			yield(n)
		}
	}); !slices.Equal(sizes, []int{88, 256, 256}) {
		t.Fatalf("600 imported events in objects of %v events; want 256, 256 and 88", sizes)
	}

	// An event written alone, the way events were before batches.
	at := time.Now().UTC()
	lone := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": kubestore.Group + "/" + kubestore.Version, "kind": "LedgerEvent",
		"metadata": map[string]any{"name": fmt.Sprintf("ea-%019d-0a0b0c", math.MaxInt64-at.UnixNano())},
		"spec":     map[string]any{"at": at.Format(time.RFC3339Nano), "type": string(joinkeys.EventNodeReleased), "hostname": "lone", "actor": "bob"},
	}}
	if _, err := c.Dynamic.Resource(ledgerEvents).Namespace(ns).Create(ctx, lone, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	all, err := s.Audit(ctx, joinkeys.AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != imported+1 {
		t.Fatalf("%d events read, want %d", len(all), imported+1)
	}
	for i, e := range all {
		want := "lone"
		if i < imported {
			want = trail[i].Hostname
		}
		if e.Hostname != want || (i > 0 && e.ID <= all[i-1].ID) {
			t.Fatalf("event %d: %s with ID %d (the one before: %d); want %s, IDs increasing", i, e.Hostname, e.ID, all[max(i-1, 0)].ID, want)
		}
	}
	if one, err := s.Audit(ctx, joinkeys.AuditQuery{Hostname: "h-300"}); err != nil || len(one) != 1 || one[0] != all[300] {
		t.Errorf("events of h-300: %+v, %v; want %+v", one, err, all[300])
	}
	if newest, err := s.Audit(ctx, joinkeys.AuditQuery{Limit: 5}); err != nil || !slices.Equal(newest, all[len(all)-5:]) {
		t.Errorf("the newest 5: %+v, %v; want %+v", newest, err, all[len(all)-5:])
	}
	if released, err := s.Audit(ctx, joinkeys.AuditQuery{Type: joinkeys.EventNodeReleased}); err != nil || len(released) != 1 || released[0].Hostname != "lone" {
		t.Errorf("released events: %+v, %v; want the lone one", released, err)
	}

	// A prune cut off after it marked the oldest batch for its deletion:
	// the mark (an update) changes no event's ID.
	tr.failDeletes.Store(true)
	if _, err := s.PruneAudit(ctx, joinkeys.AuditRetention{MaxEvents: 100}, time.Now()); err == nil {
		t.Fatal("a prune whose deletes were cut off answered no error")
	}
	tr.failDeletes.Store(false)
	if again, err := s.Audit(ctx, joinkeys.AuditQuery{}); err != nil || !slices.Equal(again, all) {
		t.Fatalf("after a prune cut off after its mark: %d events, %v; want the %d as they were, IDs included", len(again), err, len(all))
	}

	// Keep the newest 100: the oldest batch goes, the next keeps 11 of
	// its events, the newest and the lone event stay as they are.
	removed, err := s.PruneAudit(ctx, joinkeys.AuditRetention{MaxEvents: 100}, time.Now())
	if err != nil || removed != imported+1-100 {
		t.Fatalf("PruneAudit: %d removed, %v; want %d", removed, err, imported+1-100)
	}
	if sizes := slices.Sorted(maps.Values(objects())); !slices.Equal(sizes, []int{0, 11, 88}) {
		t.Errorf("after the prune the objects hold %v events (0: the lone one's own fields); want 0, 11 and 88", sizes)
	}
	left, err := s.Audit(ctx, joinkeys.AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(left, all[len(all)-100:]) {
		t.Errorf("after the prune the trail is %d events from %+v; want the newest 100 as they were, IDs included", len(left), left[0])
	}

	// A writer before this one (its deletes cut off) marked the batch of
	// 11 for its deletion, with a tighter bound; a prune that keeps it
	// clears that mark, and the batch's events keep their IDs.
	cut := &trailTransport{holding: make(chan struct{}, 1)}
	cut.failDeletes.Store(true)
	cutCfg := rest.CopyConfig(c.Config)
	cutCfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { cut.next = rt; return cut }
	earlier, err := kubestore.New(cutCfg, ns, &kubestore.Options{Writer: "a-writer-before"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := earlier.PruneAudit(ctx, joinkeys.AuditRetention{MaxEvents: 89}, time.Now()); err == nil {
		t.Fatal("a prune whose deletes were cut off answered no error")
	}
	marked := func() int {
		t.Helper()
		list, err := c.Dynamic.Resource(ledgerEvents).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, o := range list.Items {
			if o.GetAnnotations()[kubestore.DeletingAnnotation] != "" {
				n++
			}
		}
		return n
	}
	if n := marked(); n != 1 {
		t.Fatalf("%d batches marked after the cut-off prune, want the batch of 11", n)
	}
	if removed, err := s.PruneAudit(ctx, joinkeys.AuditRetention{MaxEvents: 100}, time.Now()); err != nil || removed != 0 {
		t.Fatalf("a prune that keeps everything: %d removed, %v", removed, err)
	}
	if n := marked(); n != 0 {
		t.Errorf("%d batches still marked after a prune that keeps them", n)
	}
	if again, err := s.Audit(ctx, joinkeys.AuditQuery{}); err != nil || !slices.Equal(again, left) {
		t.Errorf("after clearing a mark: %d events, %v; want the %d as they were, IDs included", len(again), err, len(left))
	}

	// Events written while a batch is being written share the next one;
	// each gets its own ID, after every other.
	release := make(chan struct{})
	tr.hold.Store(&release)
	before := len(objects())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := s.AppendAudit(ctx, joinkeys.AuditEvent{At: time.Now().UTC(), Type: joinkeys.EventKeyMinted, KeyID: "k0"}); err != nil {
			t.Error(err)
		}
	})
	<-tr.holding // the first is being written
	for i := 1; i < 40; i++ {
		wg.Go(func() {
			if err := s.AppendAudit(ctx, joinkeys.AuditEvent{At: time.Now().UTC(), Type: joinkeys.EventKeyMinted, KeyID: fmt.Sprintf("k%d", i)}); err != nil {
				t.Error(err)
			}
		})
	}
	time.Sleep(300 * time.Millisecond) // the 39 queue behind it
	close(release)
	wg.Wait()
	minted, err := s.Audit(ctx, joinkeys.AuditQuery{Type: joinkeys.EventKeyMinted})
	if err != nil || len(minted) != 40 {
		t.Fatalf("minted events: %d, %v; want 40", len(minted), err)
	}
	ids := map[int64]bool{}
	for _, e := range minted {
		if e.ID <= left[len(left)-1].ID || ids[e.ID] {
			t.Errorf("event %+v: ID not new, or not after the trail's last %d", e, left[len(left)-1].ID)
		}
		ids[e.ID] = true
	}
	if written := len(objects()) - before; written > 3 {
		t.Errorf("40 events, 39 of them queued behind the first, took %d LedgerEvents; want 2 (the first alone, then a batch)", written)
	} else {
		t.Logf("40 events, 39 of them queued behind the first: %d LedgerEvents", written)
	}
}

// fencedTrail answers a Store's creations of LedgerEvents, while armed,
// with the fence's refusal; while fenceNodes is set, its creations of
// LedgerNodes too, and its updates of keys after the first (a use given
// back after the use spent) fail.
type fencedTrail struct {
	next       http.RoundTripper
	armed      atomic.Bool
	fenceNodes atomic.Bool
	keyUpdates atomic.Int64
}

func (f *fencedTrail) RoundTrip(r *http.Request) (*http.Response, error) {
	switch {
	case f.armed.Load() && r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/ledgerevents"),
		f.fenceNodes.Load() && r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/ledgernodes"):
		body := fmt.Sprintf(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"forbidden: ValidatingAdmissionPolicy '%[1]s' with binding '%[1]s' denied request: %[1]s: another replica writes","reason":"Forbidden","code":403}`, kubestore.FencePolicy)
		return &http.Response{StatusCode: http.StatusForbidden, Status: "403 Forbidden", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{"Content-Type": []string{"application/json"}}, Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
	case f.fenceNodes.Load() && r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/joinkeys/") && f.keyUpdates.Add(1) > 1:
		return nil, errors.New("injected: the API server did not answer")
	}
	return f.next.RoundTrip(r)
}

// TestAUseKeptIsNotCalledUnwritten: a reservation the fence refuses
// gives its key's use back and answers ErrFenced (nothing was written);
// when the use cannot be given back, it answers an error that is not
// ErrFenced, since the use stays spent.
func TestAUseKeptIsNotCalledUnwritten(t *testing.T) {
	ctx := context.Background()
	tr := &fencedTrail{}
	_, _, s := storeThrough(t, func(rt http.RoundTripper) http.RoundTripper { tr.next = rt; return tr })
	insertOrgKey(t, s, "spent", 0)
	pool := joinkeys.MustPool("198.18.10.0/29", "198.18.10.1").Addresses()
	reserve := func(host string) error {
		_, err := s.ReserveNode(ctx, joinkeys.Reservation{Addresses: pool, SpendKeyID: "spent", Now: time.Now().UTC(),
			Node: joinkeys.NodeRecord{Node: joinkeys.Node{Hostname: host, PublicKey: mustKey(t), Status: joinkeys.StatusValidated}}})
		return err
	}
	tr.fenceNodes.Store(true)
	tr.keyUpdates.Store(-1) // the give-back goes through
	if err := reserve("given-back"); !errors.Is(err, joinkeys.ErrFenced) {
		t.Fatalf("a reservation the fence refused, its use given back: %v, want ErrFenced", err)
	}
	if k, err := s.Key(ctx, "spent"); err != nil || k.Uses != 0 {
		t.Fatalf("the key after its use was given back: %d uses, %v", k.Uses, err)
	}
	tr.keyUpdates.Store(0) // the give-back fails
	err := reserve("kept")
	tr.fenceNodes.Store(false)
	if err == nil || errors.Is(err, joinkeys.ErrFenced) {
		t.Errorf("a reservation the fence refused, its use kept: %v, want an error that is not ErrFenced", err)
	}
}

// TestANodeWrittenIsNotCalledUnwritten: with a LedgerNode CRD of an
// earlier version (its events go to the trail), an update whose node is
// written but whose audit event the fence refuses fails, and not as
// ErrFenced, which tells the caller that nothing was written.
func TestANodeWrittenIsNotCalledUnwritten(t *testing.T) {
	ctx := context.Background()
	tr := &fencedTrail{}
	_, _, s := storeThrough(t, func(rt http.RoundTripper) http.RoundTripper { tr.next = rt; return oldNodeSchema{tr} })
	pool := joinkeys.MustPool("198.18.9.0/29", "198.18.9.1").Addresses()
	n, err := s.ReserveNode(ctx, joinkeys.Reservation{Addresses: pool,
		Node: joinkeys.NodeRecord{Node: joinkeys.Node{Hostname: "audited", PublicKey: mustKey(t), Status: joinkeys.StatusValidated}}})
	if err != nil {
		t.Fatal(err)
	}
	tr.armed.Store(true)
	n.Status = joinkeys.StatusRegistered
	_, err = s.UpdateNode(ctx, n, joinkeys.AuditEvent{At: time.Now(), Type: joinkeys.EventNodeRegistered, Hostname: "audited", Actor: "gridweave"})
	tr.armed.Store(false)
	if err == nil || errors.Is(err, joinkeys.ErrFenced) {
		t.Fatalf("an update written without its audit event: %v, want an error that is not ErrFenced", err)
	}
	if got, err := s.Node(ctx, "audited"); err != nil || got.Status != joinkeys.StatusRegistered {
		t.Errorf("the node after the update: %+v, %v; want it registered", got.Node, err)
	}
}

// TestANodeCarriesItsOwnEvents: a node's events are written in the node
// by the writes they record, with no LedgerEvent of their own, and read
// alike by the writer, a reader and the next writer. Each keeps the ID
// its write gave it as the node is written again, as the oldest move to
// the trail past the node's bound (16), across a prune that keeps the
// newest, and as the node is released; an event held both in its node
// and in the trail is read once.
func TestANodeCarriesItsOwnEvents(t *testing.T) {
	c, ns := ledger(t)
	ctx := context.Background()
	s, err := kubestore.New(c.Config, ns, &kubestore.Options{Writer: "the-writer"})
	if err != nil {
		t.Fatal(err)
	}
	reader, err := kubestore.New(c.Config, ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	batches := func() int {
		t.Helper()
		list, err := c.Dynamic.Resource(ledgerEvents).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return len(list.Items)
	}
	event := func(typ joinkeys.EventType, i int) joinkeys.AuditEvent {
		return joinkeys.AuditEvent{At: time.Now().UTC(), Type: typ, Hostname: "carrier", Actor: "test", Reason: fmt.Sprint(i)}
	}
	seen := map[string]int64{} // each event's ID (by its reason) when first read
	// read checks that every Store reads the n events 0..n-1 in order,
	// each with the ID it was first read with, and returns them.
	read := func(n int, stores ...*kubestore.Store) []joinkeys.AuditEvent {
		t.Helper()
		var first []joinkeys.AuditEvent
		for i, st := range stores {
			got, err := st.Audit(ctx, joinkeys.AuditQuery{Hostname: "carrier"})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != n {
				t.Fatalf("store %d reads %d events, want %d: %+v", i, len(got), n, got)
			}
			for j, e := range got {
				if j > 0 && e.ID <= got[j-1].ID {
					t.Fatalf("store %d: event %s has ID %d after %d", i, e.Reason, e.ID, got[j-1].ID)
				}
				if id, ok := seen[e.Reason]; ok && id != e.ID {
					t.Fatalf("store %d: event %s has ID %d, first read with %d", i, e.Reason, e.ID, id)
				}
				seen[e.Reason] = e.ID
			}
			if i == 0 {
				first = got
			} else if !slices.Equal(got, first) {
				t.Fatalf("store %d reads %+v; store 0 read %+v", i, got, first)
			}
		}
		return first
	}

	pool := joinkeys.MustPool("198.18.11.0/29", "198.18.11.1").Addresses()
	n, err := s.ReserveNode(ctx, joinkeys.Reservation{Addresses: pool, Event: event(joinkeys.EventValidationAccepted, 0),
		Node: joinkeys.NodeRecord{Node: joinkeys.Node{Hostname: "carrier", PublicKey: mustKey(t), Status: joinkeys.StatusValidated}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := read(1, s, reader); got[0].ID>>10 != n.Revision {
		t.Fatalf("the reservation's event has ID %d; want its write's resourceVersion %d times 1024", got[0].ID, n.Revision)
	}
	n.Status = joinkeys.StatusRegistered // a prune leaves a join under way alone
	for i := 1; i < 16; i++ {
		if n, err = s.UpdateNode(ctx, n, event(joinkeys.EventVersionReported, i)); err != nil {
			t.Fatal(err)
		}
		read(i+1, s, reader)
	}
	if n, err = s.UpdateNode(ctx, n, joinkeys.AuditEvent{}); err != nil {
		t.Fatal(err)
	}
	read(16, s, reader)
	if b := batches(); b != 0 {
		t.Fatalf("16 events of a node written in %d LedgerEvents; want none", b)
	}
	for i := 16; i < 20; i++ {
		if n, err = s.UpdateNode(ctx, n, event(joinkeys.EventVersionReported, i)); err != nil {
			t.Fatal(err)
		}
		read(i+1, s, reader)
	}
	if b := batches(); b != 4 {
		t.Fatalf("4 events past the node's bound moved to the trail in %d LedgerEvents; want one each", b)
	}
	next, err := kubestore.New(c.Config, ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := next.Reload(ctx); err != nil { // loads its index, as a new leader does
		t.Fatal(err)
	}
	all := read(20, s, reader, next)

	// The newest event held in the trail too (a move whose node write
	// failed): read once.
	newest := all[len(all)-1]
	twice := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": kubestore.Group + "/" + kubestore.Version, "kind": "LedgerEvent",
		"metadata": map[string]any{"name": "held-twice"},
		"spec": map[string]any{"events": []any{map[string]any{"at": newest.At.Format(time.RFC3339Nano), "type": string(newest.Type),
			"hostname": newest.Hostname, "actor": newest.Actor, "reason": newest.Reason, "id": newest.ID}}},
	}}
	if _, err := c.Dynamic.Resource(ledgerEvents).Namespace(ns).Create(ctx, twice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	read(20, s, reader)

	// Keep the newest 5: the trail's 4 go, the node keeps its newest 5.
	removed, err := s.PruneAudit(ctx, joinkeys.AuditRetention{MaxEvents: 5}, time.Now())
	if err != nil || removed != 15 {
		t.Fatalf("PruneAudit: %d removed, %v; want 15", removed, err)
	}
	if kept := read(5, s, reader); !slices.Equal(kept, all[15:]) {
		t.Fatalf("after the prune: %+v; want the newest 5 as they were", kept)
	}
	if b := batches(); b != 1 {
		t.Fatalf("%d LedgerEvents after the prune; want the one that holds the newest event", b)
	}

	// The release moves the node's events to the trail.
	if _, err := s.DeleteNode(ctx, "carrier", 0, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := reader.Node(ctx, "carrier"); !errors.Is(err, joinkeys.ErrNodeNotFound) {
		t.Fatalf("the released node: %v", err)
	}
	if kept := read(5, s, reader); !slices.Equal(kept, all[15:]) {
		t.Fatalf("after the release: %+v; want the newest 5 as they were", kept)
	}
}

// TestTheNewestEventsAfterARelease: the events a release moves to the
// trail sit in its newest batch with the IDs of their first writes; a
// query for the newest events reads past them to the newer events of
// older batches.
func TestTheNewestEventsAfterARelease(t *testing.T) {
	c, ns := ledger(t)
	ctx := context.Background()
	s, err := kubestore.New(c.Config, ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	event := func(typ joinkeys.EventType, hostname string) joinkeys.AuditEvent {
		return joinkeys.AuditEvent{At: time.Now().UTC(), Type: typ, Hostname: hostname, Actor: "test"}
	}
	n, err := s.ReserveNode(ctx, joinkeys.Reservation{Addresses: joinkeys.MustPool("198.18.12.0/29", "198.18.12.1").Addresses(),
		Event: event(joinkeys.EventValidationAccepted, "moved"),
		Node:  joinkeys.NodeRecord{Node: joinkeys.Node{Hostname: "moved", PublicKey: mustKey(t), Status: joinkeys.StatusValidated}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AppendAudit(ctx, event(joinkeys.EventValidationRejected, "other")); err != nil {
		t.Fatal(err)
	}
	n.Status = joinkeys.StatusRegistered
	if _, err := s.UpdateNode(ctx, n, event(joinkeys.EventNodeRegistered, "moved")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteNode(ctx, "moved", 0, time.Now()); err != nil {
		t.Fatal(err)
	}
	all, err := s.Audit(ctx, joinkeys.AuditQuery{})
	if err != nil || len(all) != 3 || all[1].Hostname != "other" {
		t.Fatalf("the trail: %+v, %v; want the reservation's event, the rejection, the registration", all, err)
	}
	if newest, err := s.Audit(ctx, joinkeys.AuditQuery{Limit: 2}); err != nil || !slices.Equal(newest, all[1:]) {
		t.Errorf("the newest 2: %+v, %v; want %+v", newest, err, all[1:])
	}
}

// hookTransport runs its hook (once) before the first delete or update of
// a LedgerEvent it carries.
type hookTransport struct {
	next http.RoundTripper
	hook atomic.Pointer[func()]
}

func (h *hookTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if (r.Method == http.MethodDelete || r.Method == http.MethodPut) && strings.Contains(r.URL.Path, "/ledgerevents/") {
		if hook := h.hook.Swap(nil); hook != nil {
			(*hook)()
		}
	}
	return h.next.RoundTrip(r)
}

// TestAPruneKeepsWhatIsWrittenMeanwhile: a prune drops from a node only
// the events it chose among those it read; an event the node's update
// added since stays. It leaves a join under way (a node validated, not
// registered) alone: the release of a half-finished join is based on its
// revision.
func TestAPruneKeepsWhatIsWrittenMeanwhile(t *testing.T) {
	ctx := context.Background()
	h := &hookTransport{}
	_, _, s := storeThrough(t, func(rt http.RoundTripper) http.RoundTripper { h.next = rt; return h })
	event := func(typ joinkeys.EventType, reason string) joinkeys.AuditEvent {
		return joinkeys.AuditEvent{At: time.Now().UTC(), Type: typ, Hostname: "busy", Actor: "test", Reason: reason}
	}
	pool := joinkeys.MustPool("198.18.13.0/29", "198.18.13.1").Addresses()
	half := event(joinkeys.EventValidationAccepted, "half")
	half.Hostname = "half"
	if _, err := s.ReserveNode(ctx, joinkeys.Reservation{Addresses: pool, Event: half,
		Node: joinkeys.NodeRecord{Node: joinkeys.Node{Hostname: "half", PublicKey: mustKey(t), Status: joinkeys.StatusValidated}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendAudit(ctx, event(joinkeys.EventKeyMinted, "oldest")); err != nil {
		t.Fatal(err)
	}
	n, err := s.ReserveNode(ctx, joinkeys.Reservation{Addresses: pool, Event: event(joinkeys.EventValidationAccepted, "0"),
		Node: joinkeys.NodeRecord{Node: joinkeys.Node{Hostname: "busy", PublicKey: mustKey(t), Status: joinkeys.StatusValidated}}})
	if err != nil {
		t.Fatal(err)
	}
	n.Status = joinkeys.StatusRegistered
	for _, reason := range []string{"1", "2"} {
		if n, err = s.UpdateNode(ctx, n, event(joinkeys.EventVersionReported, reason)); err != nil {
			t.Fatal(err)
		}
	}
	// The prune keeps the newest two of what it reads (1 and 2); as it
	// deletes the trail's batch, an update adds "late" to the node.
	late := func() {
		if _, err := s.UpdateNode(ctx, n, event(joinkeys.EventVersionReported, "late")); err != nil {
			t.Error(err)
		}
	}
	h.hook.Store(&late)
	if removed, err := s.PruneAudit(ctx, joinkeys.AuditRetention{MaxEvents: 2}, time.Now()); err != nil || removed != 2 {
		t.Fatalf("PruneAudit: %d removed, %v; want 2 (the trail's oldest and busy's 0; half's stays)", removed, err)
	}
	got, err := s.Audit(ctx, joinkeys.AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, e := range got {
		reasons = append(reasons, e.Reason)
	}
	if !slices.Equal(reasons, []string{"half", "1", "2", "late"}) {
		t.Errorf("after the prune: events %q; want half, 1, 2 and late", reasons)
	}
}

// TestEventsAnOldSchemaDropsGoToTheTrail: a node written through an API
// server whose LedgerNode CRD predates node events (oldNodeSchema) loses
// the events it carried in the API server's answer: the writer writes
// them to the trail, with their IDs, beside the update's own.
func TestEventsAnOldSchemaDropsGoToTheTrail(t *testing.T) {
	c, ns := ledger(t)
	ctx := context.Background()
	s, err := kubestore.New(c.Config, ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	event := func(typ joinkeys.EventType) joinkeys.AuditEvent {
		return joinkeys.AuditEvent{At: time.Now().UTC(), Type: typ, Hostname: "dropped", Actor: "test"}
	}
	n, err := s.ReserveNode(ctx, joinkeys.Reservation{Addresses: joinkeys.MustPool("198.18.14.0/29", "198.18.14.1").Addresses(),
		Event: event(joinkeys.EventValidationAccepted),
		Node:  joinkeys.NodeRecord{Node: joinkeys.Node{Hostname: "dropped", PublicKey: mustKey(t), Status: joinkeys.StatusValidated}}})
	if err != nil {
		t.Fatal(err)
	}
	first, err := s.Audit(ctx, joinkeys.AuditQuery{})
	if err != nil || len(first) != 1 {
		t.Fatalf("the reservation's event: %+v, %v", first, err)
	}
	cfg := rest.CopyConfig(c.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return oldNodeSchema{rt} }
	old, err := kubestore.New(cfg, ns, nil) // the next writer, through such an API server
	if err != nil {
		t.Fatal(err)
	}
	n.Status = joinkeys.StatusRegistered
	if _, err := old.UpdateNode(ctx, n, event(joinkeys.EventNodeRegistered)); err != nil {
		t.Fatal(err)
	}
	got, err := s.Audit(ctx, joinkeys.AuditQuery{})
	if err != nil || len(got) != 2 || got[0] != first[0] || got[1].Type != joinkeys.EventNodeRegistered {
		t.Fatalf("after the update: %+v, %v; want %+v as it was, then the registration", got, err, first[0])
	}
}
