package leaderstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
	"time"

	"gridweave.dev/joinkeys"
	"gridweave.dev/mesh/wgkey"
)

// Target is where a write goes.
type Target struct {
	// URL is the leader's channel (its Handler's base URL, e.g.
	// https://10.0.0.5:7443); empty while no leader is known.
	URL string
	// Self: this replica leads, and writes to its own Store.
	Self bool
}

// Options configures New.
type Options struct {
	// Leader says where writes go now (required). refresh asks it to read
	// again rather than answer what it last read: the last target did not
	// take a write.
	Leader func(ctx context.Context, refresh bool) (Target, error)
	// Client carries the writes (default http.DefaultClient); with TLS it
	// should trust only the master's identity. Its Timeout, if any,
	// should exceed the leader's longest write (a reservation on a slow
	// API server takes minutes): a write whose answer is given up is
	// answered as lost, while the leader may still finish or undo it.
	// Reads bound themselves (two seconds), and writes at five minutes.
	Client *http.Client
	// Credential is the replicas' shared credential (Credential).
	Credential string
	// Wait is how long a write waits for a leader to take it (default
	// 10s), trying again as the leader changes.
	Wait time.Duration
}

// Store reads from the Store it wraps and hands every write to the
// leader. It is safe for concurrent use.
type Store struct {
	joinkeys.Store // reads, and writes while this replica leads
	opts           Options
}

// New returns a Store that reads from local and writes through the
// leader that opts.Leader names.
func New(local joinkeys.Store, opts Options) (*Store, error) {
	if local == nil || opts.Leader == nil {
		return nil, errors.New("leaderstore: a local Store and Options.Leader are required")
	}
	if opts.Client == nil {
		opts.Client = http.DefaultClient
	}
	if opts.Wait <= 0 {
		opts.Wait = 10 * time.Second
	}
	return &Store{Store: local, opts: opts}, nil
}

var _ joinkeys.Store = (*Store)(nil)

// InsertKey implements joinkeys.Store.
func (s *Store) InsertKey(ctx context.Context, key joinkeys.KeyRecord) error {
	self, _, err := s.forward(ctx, "insert_key", insertKeyRequest{Key: key})
	if self {
		return s.Store.InsertKey(ctx, key)
	}
	return err
}

// RevokeKey implements joinkeys.Store.
func (s *Store) RevokeKey(ctx context.Context, id string, at time.Time) (joinkeys.KeyRecord, error) {
	self, a, err := s.forward(ctx, "revoke_key", revokeKeyRequest{ID: id, At: at})
	switch {
	case self:
		return s.Store.RevokeKey(ctx, id, at)
	case err != nil:
		return joinkeys.KeyRecord{}, err
	case a.Key == nil:
		return joinkeys.KeyRecord{}, errNoResult("revoke_key")
	}
	return *a.Key, nil
}

// ReturnKeyUse implements joinkeys.Store.
func (s *Store) ReturnKeyUse(ctx context.Context, id string) (joinkeys.KeyRecord, error) {
	self, a, err := s.forward(ctx, "return_key_use", returnKeyUseRequest{ID: id})
	switch {
	case self:
		return s.Store.ReturnKeyUse(ctx, id)
	case err != nil:
		return joinkeys.KeyRecord{}, err
	case a.Key == nil:
		return joinkeys.KeyRecord{}, errNoResult("return_key_use")
	}
	return *a.Key, nil
}

// ReserveNode implements joinkeys.Store.
func (s *Store) ReserveNode(ctx context.Context, r joinkeys.Reservation) (joinkeys.NodeRecord, error) {
	self, a, err := s.forward(ctx, "reserve_node", reservationRequest(r))
	if self {
		return s.Store.ReserveNode(ctx, r)
	}
	if errors.Is(err, errAnswerLost) && len(r.Node.TokenHash) > 0 {
		// The node token is new with each reservation: a node holding
		// its hash is this one, landed before the leader died. The read
		// has its own time: a caller gone by now is no answer to it.
		readCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lostAnswerRead)
		defer cancel()
		if n, readErr := s.Store.Node(readCtx, r.Node.Hostname); readErr == nil && bytes.Equal(n.TokenHash, r.Node.TokenHash) {
			return n, nil
		}
	}
	return nodeResult("reserve_node", a, err)
}

// UpdateNode implements joinkeys.Store.
func (s *Store) UpdateNode(ctx context.Context, n joinkeys.NodeRecord, event joinkeys.AuditEvent) (joinkeys.NodeRecord, error) {
	self, a, err := s.forward(ctx, "update_node", updateNodeRequest{Node: n, Event: event})
	if self {
		return s.Store.UpdateNode(ctx, n, event)
	}
	return nodeResult("update_node", a, err)
}

// DeleteNode implements joinkeys.Store.
func (s *Store) DeleteNode(ctx context.Context, hostname string, revision int64, at time.Time) (joinkeys.NodeRecord, error) {
	self, a, err := s.forward(ctx, "delete_node", deleteNodeRequest{Hostname: hostname, Revision: revision, At: at})
	if self {
		return s.Store.DeleteNode(ctx, hostname, revision, at)
	}
	return nodeResult("delete_node", a, err)
}

// AppendAudit implements joinkeys.Store.
func (s *Store) AppendAudit(ctx context.Context, e joinkeys.AuditEvent) error {
	self, _, err := s.forward(ctx, "append_audit", appendAuditRequest{Event: e})
	if self {
		return s.Store.AppendAudit(ctx, e)
	}
	return err
}

// Key implements joinkeys.Store: the leader's answer (its Store holds
// what it wrote last), or the wrapped Store's while no leader answers.
func (s *Store) Key(ctx context.Context, id string) (joinkeys.KeyRecord, error) {
	a, asked, err := s.askLeader(ctx, "key", keyRequest{ID: id})
	switch {
	case !asked:
		return s.Store.Key(ctx, id)
	case err != nil:
		return joinkeys.KeyRecord{}, err
	case a.Key == nil:
		return joinkeys.KeyRecord{}, errNoResult("key")
	}
	return *a.Key, nil
}

// Node implements joinkeys.Store as Key does.
func (s *Store) Node(ctx context.Context, hostname string) (joinkeys.NodeRecord, error) {
	a, asked, err := s.askLeader(ctx, "node", nodeRequest{Hostname: hostname})
	if !asked {
		return s.Store.Node(ctx, hostname)
	}
	return nodeResult("node", a, err)
}

// NodeByPublicKey implements joinkeys.Store as Key does.
func (s *Store) NodeByPublicKey(ctx context.Context, key wgkey.Key) (joinkeys.NodeRecord, error) {
	a, asked, err := s.askLeader(ctx, "node_by_public_key", nodeByPublicKeyRequest{PublicKey: key})
	if !asked {
		return s.Store.NodeByPublicKey(ctx, key)
	}
	return nodeResult("node_by_public_key", a, err)
}

// readWait bounds a read asked of the leader: a leader that does not
// answer by then is read around.
const readWait = 2 * time.Second

// askLeader asks the leader for a read, once: asked is false when this
// replica leads, when no leader is known or when the one asked did not
// answer, and the caller reads the wrapped Store instead (the shared
// ledger, as fresh as the API server is).
func (s *Store) askLeader(ctx context.Context, op string, body any) (_ answer, asked bool, _ error) {
	target, err := s.opts.Leader(ctx, false)
	if err != nil || target.Self || target.URL == "" {
		return answer{}, false, nil
	}
	payload, err := json.Marshal(body)
	if err != nil {
		return answer{}, false, err
	}
	ctx, cancel := context.WithTimeout(ctx, readWait)
	defer cancel()
	a, _, err := s.send(ctx, target.URL+PathPrefix+op, payload, nil)
	if errors.Is(err, ErrLeaderUnavailable) || (err != nil && a.Error == nil) {
		return answer{}, false, nil
	}
	return a, true, err
}

// PruneAudit implements joinkeys.Store.
func (s *Store) PruneAudit(ctx context.Context, r joinkeys.AuditRetention, now time.Time) (int, error) {
	self, a, err := s.forward(ctx, "prune_audit", pruneAuditRequest{Retention: r, Now: now})
	if self {
		return s.Store.PruneAudit(ctx, r, now)
	}
	return a.Removed, err
}

func nodeResult(op string, a answer, err error) (joinkeys.NodeRecord, error) {
	switch {
	case err != nil:
		return joinkeys.NodeRecord{}, err
	case a.Node == nil:
		return joinkeys.NodeRecord{}, errNoResult(op)
	}
	return *a.Node, nil
}

func errNoResult(op string) error {
	return fmt.Errorf("%w: the leader answered %s without a result", ErrLeaderUnavailable, op)
}

// errAnswerLost: a write reached the leader whole, and no answer came.
var errAnswerLost = errors.New("the answer was lost, the write may or may not have landed")

// lostAnswerRead bounds the read that looks for a reservation whose
// answer was lost.
const lostAnswerRead = 30 * time.Second

// maxAnswerWait bounds the wait for the leader's answer to a write it was
// sent (Options.Client's own timeout may be shorter).
const maxAnswerWait = 5 * time.Minute

// forward sends one write to the leader and returns its answer, the error
// the leader's Store returned, or ErrLeaderUnavailable; self reports that
// this replica leads, so the caller writes to its own Store instead.
func (s *Store) forward(ctx context.Context, op string, body any) (self bool, _ answer, _ error) {
	payload, err := json.Marshal(body)
	if err != nil {
		return false, answer{}, err
	}
	giveUp := time.NewTimer(s.opts.Wait)
	defer giveUp.Stop()
	pause := 20 * time.Millisecond
	refresh := false
	for {
		target, err := s.opts.Leader(ctx, refresh)
		var why error
		switch {
		case err != nil:
			why = fmt.Errorf("finding the leader: %w", err)
		case target.Self:
			return true, answer{}, nil
		case target.URL == "":
			why = errors.New("no replica leads")
		default:
			a, retry, err := s.sendWrite(ctx, target.URL+PathPrefix+op, payload)
			if !retry {
				return false, a, err
			}
			why = err
		}
		// Nothing was written: wait for a leader and try again.
		refresh = true
		select {
		case <-ctx.Done():
			return false, answer{}, fmt.Errorf("%w: %w (%v)", ErrLeaderUnavailable, ctx.Err(), why)
		case <-giveUp.C:
			return false, answer{}, fmt.Errorf("%w within %s: %v", ErrLeaderUnavailable, s.opts.Wait, why)
		case <-time.After(pause):
		}
		pause = min(2*pause, 500*time.Millisecond)
	}
}

// sendWrite sends a write, once. Until it is sent whole, ctx's end and
// Options.Wait end it (nothing was written, and the caller may try again);
// once sent, its answer is waited for even when ctx ends: the leader
// finishes a write it was sent whether or not this replica's caller stays,
// and a write given up while in flight would answer an error for what
// may have landed (a reservation, its key's use spent, under a node token
// nobody holds). The client's own timeout, else maxAnswerWait, bounds
// that wait.
func (s *Store) sendWrite(ctx context.Context, url string, payload []byte) (_ answer, retry bool, _ error) {
	answerCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), maxAnswerWait)
	defer cancel()
	var written atomic.Bool
	unsent, stopUnsent := context.WithTimeout(ctx, s.opts.Wait)
	defer stopUnsent()
	stop := context.AfterFunc(unsent, func() {
		if !written.Load() {
			cancel()
		}
	})
	defer stop()
	return s.send(answerCtx, url, payload, func() { written.Store(true) })
}

// send makes one attempt. retry reports that the leader did not take the
// write (it was never sent whole, or a replica that does not lead refused
// it), so that trying again cannot write it twice.
// wrote, when not nil, is told once the request was written whole.
func (s *Store) send(ctx context.Context, url string, payload []byte, wrote func()) (_ answer, retry bool, _ error) {
	var sent atomic.Bool
	trace := &httptrace.ClientTrace{WroteRequest: func(info httptrace.WroteRequestInfo) {
		if info.Err == nil {
			sent.Store(true)
			if wrote != nil {
				wrote()
			}
		}
	}}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodPost, url, bytes.NewReader(payload))
	if err != nil {
		return answer{}, false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+s.opts.Credential)
	resp, err := s.opts.Client.Do(req)
	if err != nil {
		if !sent.Load() {
			return answer{}, true, err
		}
		return answer{}, false, fmt.Errorf("%w: %w: %v", ErrLeaderUnavailable, errAnswerLost, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxRequestBytes))
	if err != nil {
		return answer{}, false, fmt.Errorf("%w: %w: %v", ErrLeaderUnavailable, errAnswerLost, err)
	}
	var a answer
	decodeErr := json.Unmarshal(raw, &a)
	switch {
	case resp.StatusCode == http.StatusServiceUnavailable && decodeErr == nil && a.Error != nil && a.Error.Kind == kindNotLeader:
		return answer{}, true, errors.New("the replica asked does not lead")
	case resp.StatusCode != http.StatusOK:
		// Not the leader's Store answering: the channel refused the
		// write before it reached it (a credential the replicas do not
		// share, a field a replica of another version does not know, a
		// body over the bound). The ledger cannot take this replica's
		// writes, as when no leader answers; the caller is not at fault.
		return answer{}, false, fmt.Errorf("%w: the leader refused the write: %s: %s", ErrLeaderUnavailable, resp.Status, bytes.TrimSpace(raw))
	case decodeErr != nil:
		return answer{}, false, fmt.Errorf("ledger leader: a malformed answer: %w", decodeErr)
	case a.Error != nil:
		return a, false, a.Error.decode()
	}
	return a, false, nil
}
