package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// ErrLost is Run's error when the Lease was lost while leading.
var ErrLost = errors.New("lost the Lease")

// ErrUnfinished is what work returns (wrapped) when it stopped with some
// of its effects still under way (writes sent, not answered): Run then
// does not give the Lease up, and it expires a whole duration after the
// last renewal, as a lost one does, rather than at once.
var ErrUnfinished = errors.New("work still under way")

// Options say which Lease Run competes for, as whom, and how long a
// holder that stops renewing keeps it.
type Options struct {
	// Client reaches the Leases (kubernetes.Interface.CoordinationV1()).
	Client coordinationv1.LeasesGetter
	// Namespace and Name name the Lease; it is made when missing.
	Namespace, Name string
	// Identity is this candidate's name, unique among the candidates
	// (a pod's name).
	Identity string
	// Duration is how long the Lease lasts without a renewal: how long
	// a stopped leader delays its successor, in whole seconds (a
	// fraction is dropped: the Lease records seconds). It renews every
	// two thirds of it at the latest and retries every seventh. Default
	// 15 s.
	Duration time.Duration
	// Logger says when this candidate starts and stops leading, and who
	// leads otherwise. Default discards.
	Logger *slog.Logger
	// Renewed, when set, is told of each write of the Lease by this
	// candidate that the API server took (taking it, renewing it), with
	// the time the write was sent: no other candidate takes the Lease
	// until Duration after that, so a holder that answers only within a
	// margin of it answers only while no one else can hold the Lease.
	Renewed func(sent time.Time)
}

// renewalLock is a resourcelock.Interface that tells renewed of each
// Create or Update it made, with the time it was sent.
type renewalLock struct {
	resourcelock.Interface
	renewed func(sent time.Time)
}

func (l renewalLock) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	sent := time.Now()
	err := l.Interface.Create(ctx, rec)
	if err == nil {
		l.renewed(sent)
	}
	return err
}

func (l renewalLock) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	sent := time.Now()
	err := l.Interface.Update(ctx, rec)
	if err == nil {
		l.renewed(sent)
	}
	return err
}

// Run competes for the Lease until ctx ends and runs lead while it holds
// it; see the package documentation for what it returns.
func Run(ctx context.Context, opts Options, lead func(ctx context.Context) error) error {
	if opts.Client == nil || opts.Name == "" || opts.Identity == "" {
		return errors.New("lease: Options.Client, Name and Identity are required")
	}
	duration := opts.Duration
	if duration == 0 {
		duration = 15 * time.Second
	}
	// The Lease records whole seconds, and the other candidates judge it
	// by them: a holder reckoning with more (1.5 s recorded as 1) would
	// renew too late to stop before a successor starts.
	duration = max(duration.Truncate(time.Second), time.Second)
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	leading := make(chan error, 1)
	// The elector starts the leading in a goroutine of its own and does
	// not wait for it: once Run returned (done), a leading that had not
	// started yet does not start, and one that had is waited for.
	var gate sync.Mutex
	started, done := false, false
	var stopWork context.CancelFunc // the leading's own cancel, once it started
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: opts.Name, Namespace: opts.Namespace},
		Client:     opts.Client,
		LockConfig: resourcelock.ResourceLockConfig{Identity: opts.Identity},
	}
	// The Lease is given up by hand once the work has returned (release),
	// not by the elector as its context ends, while the work may still be
	// stopping: a successor never starts beside it.
	var electorLock resourcelock.Interface = lock
	if opts.Renewed != nil {
		electorLock = renewalLock{lock, opts.Renewed}
	}
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          electorLock,
		LeaseDuration: duration,
		RenewDeadline: duration * 2 / 3,
		RetryPeriod:   duration / 7,
		Name:          opts.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) {
				// The work's context ends with the elector's (the Lease
				// lost) or with ctx; the elector renews the Lease until
				// the work has returned.
				wctx, cancel := context.WithCancel(lctx)
				defer cancel()
				gate.Lock()
				if done {
					gate.Unlock()
					return
				}
				started, stopWork = true, cancel
				if ctx.Err() != nil {
					cancel()
				}
				gate.Unlock()
				log.Info("lease: leading", "lease", opts.Name, "identity", opts.Identity)
				err := lead(wctx)
				if lctx.Err() != nil && ctx.Err() == nil {
					// The elector ended the leading: its renewals failed.
					err = errors.Join(ErrLost, err)
				}
				leading <- err
			},
			OnStoppedLeading: func() { log.Info("lease: stopped leading", "lease", opts.Name, "identity", opts.Identity) },
			OnNewLeader: func(id string) {
				if id != opts.Identity {
					log.Info("lease: another candidate leads", "lease", opts.Name, "leader", id, "identity", opts.Identity)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("lease: Options.Duration: %w", err)
	}
	// The elector runs until the work returned, not until ctx ends: a
	// leader whose work takes a while to stop (writes under way) keeps
	// renewing the Lease meanwhile, so no successor starts beside it. A
	// candidate that does not lead stops competing as ctx ends.
	electCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	stopOnEnd := context.AfterFunc(ctx, func() {
		gate.Lock()
		defer gate.Unlock()
		if !started {
			stop()
			return
		}
		stopWork()
	})
	defer stopOnEnd()
	ran := make(chan struct{})
	go func() { elector.Run(electCtx); close(ran) }()
	select {
	case <-ran:
		// Run does not wait for the leading to end: it has ended before
		// this returns.
		gate.Lock()
		done = true
		wait := started
		gate.Unlock()
		var leadErr error
		if wait {
			leadErr = <-leading
		}
		release(lock, opts.Identity, leadErr, log)
		if ctx.Err() != nil {
			return leadErr
		}
		if errors.Is(leadErr, ErrLost) {
			return leadErr
		}
		return errors.Join(ErrLost, leadErr)
	case err := <-leading:
		// Leading ended on its own (or the Lease was lost as it did):
		// give the Lease up.
		stop()
		<-ran
		release(lock, opts.Identity, err, log)
		if ctx.Err() != nil {
			return err
		}
		if err == nil {
			err = errors.New("the work ended while leading")
		}
		return err
	}
}

// release gives the Lease up when identity still holds it, as the
// elector's own release does: no holder, and a duration of a second, so
// another candidate takes it at its next try; not when the work's error
// (leadErr) says it left something under way (ErrUnfinished).
func release(lock *resourcelock.LeaseLock, identity string, leadErr error, log *slog.Logger) {
	if errors.Is(leadErr, ErrUnfinished) {
		log.Warn("lease: kept until it expires: the work left something under way", "lease", lock.LeaseMeta.Name, "err", leadErr)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rec, _, err := lock.Get(ctx)
	if err != nil || rec.HolderIdentity != identity {
		return
	}
	now := metav1.NewTime(time.Now())
	// The lock updates the Lease it read: a takeover since is a conflict.
	if err := lock.Update(ctx, resourcelock.LeaderElectionRecord{LeaderTransitions: rec.LeaderTransitions, LeaseDurationSeconds: 1, RenewTime: now, AcquireTime: now}); err != nil {
		log.Warn("lease: giving the Lease up", "lease", lock.LeaseMeta.Name, "err", err)
	}
}
