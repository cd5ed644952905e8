package gridweave

import (
	"context"
	"time"
)

// Run does the master's background work until ctx ends: the fleet's
// (the mesh restored from the ledger, pod CIDRs and pool labels kept in
// step with the Kubernetes Nodes, half-finished joins released; see
// fleet.Service.Run), following the KubeTorch jobs' Ray jobs, and a sample
// of the fleet a minute for the console's history. When ctx ends, the
// long polls of the directory that wait are answered at once (they were
// taken from the HTTP server, whose shutdown does not see them).
func (s *Server) Run(ctx context.Context) error {
	fleetDone := make(chan error, 1)
	go func() { fleetDone <- s.fleet.Run(ctx) }()
	if s.approver != nil {
		go func() { _ = s.approver.Run(ctx) }()
	}
	follow := time.NewTicker(s.cfg.KubeTorchSyncInterval)
	defer follow.Stop()
	sample := time.NewTicker(historyEvery)
	defer sample.Stop()
	_ = s.nodes.sampleFleet(ctx)
	for {
		select {
		case <-ctx.Done():
			s.nodes.park.answerAll()
			return <-fleetDone
		case <-sample.C:
			if err := s.nodes.sampleFleet(ctx); err != nil {
				s.log.WarnContext(ctx, "sampling the fleet for the console", "err", err)
			}
		case <-follow.C:
			if _, err := s.FollowKubeTorchJobs(ctx); err != nil {
				s.log.WarnContext(ctx, "following KubeTorch jobs", "err", err)
			}
		}
	}
}
