package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// The tests run side by side (t.Parallel): each has its own fake API
// server, and they mostly wait on the Lease's timing.

const testDuration = 2 * time.Second

func options(kube *fake.Clientset, identity string) Options {
	return Options{Client: kube.CoordinationV1(), Namespace: "system", Name: "leader", Identity: identity, Duration: testDuration, Logger: slog.New(slog.DiscardHandler)}
}

// TestOneLeadsAndTheOtherTakesOver: of two candidates one leads at a
// time; when the leader's context ends it gives the Lease up and returns
// nil once its work has returned, and the other takes over.
func TestOneLeadsAndTheOtherTakesOver(t *testing.T) {
	t.Parallel()
	handOver(t, 50*time.Millisecond) // work that takes a moment to stop
}

// TestALeaderRenewsWhileItsWorkStops: a leader whose context ended
// keeps renewing the Lease while its work takes longer than the Lease's
// duration to stop (writes under way, answered late), so the other
// candidate leads only once it returned.
func TestALeaderRenewsWhileItsWorkStops(t *testing.T) {
	t.Parallel()
	handOver(t, 2*testDuration)
}

// handOver runs two candidates, a then b, checks that b does not lead
// while a holds the Lease, stops a, whose work takes stopping to return
// once its context ended, and checks that b takes over, never beside a.
func handOver(t *testing.T, stopping time.Duration) {
	kube := fake.NewClientset()
	var leaders atomic.Int32
	led := make(chan string, 2)
	work := func(name string, stopping time.Duration) func(context.Context) error {
		return func(ctx context.Context) error {
			if n := leaders.Add(1); n > 1 {
				t.Errorf("%d candidates lead at once", n)
			}
			led <- name
			<-ctx.Done()
			time.Sleep(stopping)
			leaders.Add(-1)
			return nil
		}
	}
	ctxA, stopA := context.WithCancel(context.Background())
	doneA := make(chan error, 1)
	go func() { doneA <- Run(ctxA, options(kube, "a"), work("a", stopping)) }()
	if got := <-led; got != "a" {
		t.Fatalf("%s leads first", got)
	}
	ctxB, stopB := context.WithCancel(context.Background())
	defer stopB()
	doneB := make(chan error, 1)
	go func() { doneB <- Run(ctxB, options(kube, "b"), work("b", 0)) }()
	time.Sleep(testDuration) // b competes while a holds the Lease
	select {
	case got := <-led:
		t.Fatalf("%s leads while a holds the Lease", got)
	default:
	}
	stopA()
	if err := <-doneA; err != nil {
		t.Fatalf("a, stopped: %v", err)
	}
	select {
	case got := <-led:
		if got != "b" {
			t.Fatalf("%s leads after a", got)
		}
	case <-time.After(5 * testDuration):
		t.Fatal("b did not take over after a gave the Lease up")
	}
	stopB()
	if err := <-doneB; err != nil {
		t.Fatalf("b, stopped: %v", err)
	}
}

// TestLostLease: a leader whose Lease another holder took (its renewals
// refused, as the API server refuses an update based on a stale read)
// sees its work's context end and returns ErrLost.
func TestLostLease(t *testing.T) {
	t.Parallel()
	kube := fake.NewClientset()
	var stolen atomic.Bool
	kube.PrependReactor("update", "leases", func(action k8stesting.Action) (bool, runtime.Object, error) {
		l := action.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease)
		if stolen.Load() && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == "a" {
			return true, nil, apierrors.NewConflict(coordinationv1.Resource("leases"), l.Name, errors.New("the object has been modified"))
		}
		return false, nil, nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	leading := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, options(kube, "a"), func(ctx context.Context) error {
			close(leading)
			<-ctx.Done()
			return nil
		})
	}()
	<-leading
	// Another holder takes the Lease over behind a's back, for longer
	// than a's renew deadline.
	l, err := kube.CoordinationV1().Leases("system").Get(ctx, "leader", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	other, now, seconds := "thief", metav1.NewMicroTime(time.Now()), int32(60)
	l.Spec = coordinationv1.LeaseSpec{HolderIdentity: &other, LeaseDurationSeconds: &seconds, AcquireTime: &now, RenewTime: &now}
	if _, err := kube.CoordinationV1().Leases("system").Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	stolen.Store(true)
	select {
	case err := <-done:
		if !errors.Is(err, ErrLost) {
			t.Fatalf("Run after the Lease was taken: %v, want ErrLost", err)
		}
	case <-ctx.Done():
		t.Fatal("Run did not stop after its Lease was taken")
	}
}

// TestWorkThatStops: work that returns on its own ends Run with its
// error (nil becomes an error: leading is not meant to end), and the
// Lease is given up.
func TestWorkThatStops(t *testing.T) {
	t.Parallel()
	kube := fake.NewClientset()
	failed := errors.New("the device failed")
	err := Run(context.Background(), options(kube, "a"), func(context.Context) error { return failed })
	if !errors.Is(err, failed) {
		t.Fatalf("Run: %v, want the work's error", err)
	}
	if err := Run(context.Background(), options(kube, "b"), func(context.Context) error { return nil }); err == nil {
		t.Fatal("Run returned nil for work that stopped while leading")
	}
	l, err := kube.CoordinationV1().Leases("system").Get(context.Background(), "leader", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := l.Spec.HolderIdentity; h != nil && *h != "" {
		t.Errorf("the Lease is still held by %q", *h)
	}
	if err := Run(context.Background(), Options{}, nil); err == nil {
		t.Error("Run without a client, a name or an identity returned nil")
	}
}

// TestUnfinishedWorkKeepsTheLease: work that stops (its context ended)
// with something under way (ErrUnfinished) leaves the Lease held: it
// expires, a whole duration after the last renewal, instead of going to
// the next candidate at once; work that finished gives it up.
func TestUnfinishedWorkKeepsTheLease(t *testing.T) {
	t.Parallel()
	kube := fake.NewClientset()
	holder := func() string {
		t.Helper()
		l, err := kube.CoordinationV1().Leases("system").Get(context.Background(), "leader", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	for _, c := range []struct {
		work error
		want string
	}{
		{fmt.Errorf("%w: a write sent, not answered", ErrUnfinished), "a"},
		{nil, ""},
	} {
		ctx, stop := context.WithCancel(context.Background())
		leading := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- Run(ctx, options(kube, "a"), func(ctx context.Context) error { close(leading); <-ctx.Done(); return c.work })
		}()
		<-leading
		stop()
		if err := <-done; !errors.Is(err, c.work) {
			t.Fatalf("Run: %v, want the work's %v", err, c.work)
		}
		if got := holder(); got != c.want {
			t.Errorf("work that returned %v: the Lease is held by %q, want %q", c.work, got, c.want)
		}
		if c.want != "" {
			// Expired the way a lost Lease does, for the next case.
			if err := kube.CoordinationV1().Leases("system").Delete(context.Background(), "leader", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestRenewedTellsOfEachTakenWrite: Renewed hears of the write that took
// the Lease and of the renewals after it, each with the time it was sent
// (before it reached the API server), and of none the API server
// refused.
func TestRenewedTellsOfEachTakenWrite(t *testing.T) {
	t.Parallel()
	kube := fake.NewClientset()
	var refuse atomic.Bool
	var arrived atomic.Int64 // when the last write of the Lease reached the API server
	for _, verb := range []string{"create", "update"} {
		kube.PrependReactor(verb, "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
			if refuse.Load() {
				return true, nil, apierrors.NewInternalError(errors.New("the API server is away"))
			}
			arrived.Store(time.Now().UnixNano())
			return false, nil, nil
		})
	}
	renewals := make(chan time.Time, 100)
	var late atomic.Int32
	opts := options(kube, "a")
	opts.Renewed = func(sent time.Time) {
		if sent.UnixNano() > arrived.Load() {
			late.Add(1) // timed after the write reached the API server
		}
		renewals <- sent
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	leading := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, opts, func(ctx context.Context) error { close(leading); <-ctx.Done(); return nil })
	}()
	<-leading
	var last time.Time
	for range 3 { // the taking, then renewals
		select {
		case sent := <-renewals:
			if !sent.After(last) {
				t.Errorf("a renewal sent at %v, not after the one before (%v)", sent, last)
			}
			last = sent
		case <-time.After(5 * testDuration):
			t.Fatal("no renewal heard of")
		}
	}
	if n := late.Load(); n > 0 {
		t.Errorf("%d renewals were timed after they reached the API server; want the time each was sent", n)
	}
	// Refused renewals are not heard of (one already past the refusal
	// may still be).
	refuse.Store(true)
	time.Sleep(testDuration / 4)
	for len(renewals) > 0 {
		<-renewals
	}
	time.Sleep(testDuration / 2)
	if n := len(renewals); n > 0 {
		t.Errorf("%d renewals heard of while the API server refused them", n)
	}
	refuse.Store(false)
	stop()
	<-done
}
