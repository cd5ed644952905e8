package linkbook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"gridweave.dev/joinkeys/leaderstore"
)

// PathPrefix is where Handler serves the leader's Book: POST put, GET get
// (?hostname=), GET all and POST keep.
const PathPrefix = "/links/v1/"

// Bounds on the channel: one report; the hostnames a keep names (some
// 64 bytes each); the answer of all (every node's reports).
const (
	maxReportBytes = 1 << 20
	maxKeepBytes   = 16 << 20
	maxAllBytes    = 256 << 20
)

type putRequest struct {
	Hostname string `json:"hostname"`
	Report   Report `json:"report"`
}

type keepRequest struct {
	Present []string `json:"present"`
}

type getAnswer struct {
	Report *Report `json:"report"`
}

// HandlerOptions configures Handler.
type HandlerOptions struct {
	// Credential is the replicas' shared credential
	// (leaderstore.Credential); a request without it is refused (401).
	Credential string
	// Leading reports whether this replica leads now; while it does not,
	// every request is refused (503) and the asker looks for the leader.
	Leading func() bool
}

// Handler serves book to the other replicas at PathPrefix.
func Handler(book Book, opts HandlerOptions) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+PathPrefix+"put", func(w http.ResponseWriter, r *http.Request) {
		var q putRequest
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxReportBytes))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&q); err != nil || q.Hostname == "" {
			http.Error(w, "a report: {hostname, report}", http.StatusBadRequest)
			return
		}
		if err := book.Put(r.Context(), q.Hostname, q.Report); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST "+PathPrefix+"keep", func(w http.ResponseWriter, r *http.Request) {
		var q keepRequest
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxKeepBytes))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&q); err != nil {
			http.Error(w, "hostnames to keep: {present}", http.StatusBadRequest)
			return
		}
		present := make(map[string]bool, len(q.Present))
		for _, h := range q.Present {
			present[h] = true
		}
		if err := book.Keep(r.Context(), present); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET "+PathPrefix+"get", func(w http.ResponseWriter, r *http.Request) {
		rep, ok, err := book.Get(r.Context(), r.URL.Query().Get("hostname"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		var a getAnswer
		if ok {
			a.Report = &rep
		}
		writeJSON(w, a)
	})
	mux.HandleFunc("GET "+PathPrefix+"all", func(w http.ResponseWriter, r *http.Request) {
		all, err := book.All(r.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		writeJSON(w, all)
	})
	return leaderstore.ForReplicas(opts.Credential, opts.Leading, mux)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// FollowerOptions configures NewFollower.
type FollowerOptions struct {
	// Leader says where the leader's Book is (required), as
	// leaderstore.Options.Leader does for the ledger.
	Leader func(ctx context.Context, refresh bool) (leaderstore.Target, error)
	// Client carries the requests (default http.DefaultClient).
	Client *http.Client
	// Credential is the replicas' shared credential.
	Credential string
	// MaxAge is how long All's answer is reused (default one second):
	// node lists and metrics read every report.
	MaxAge time.Duration
	// Wait bounds how long a request looks for a leader (default 5s).
	Wait time.Duration
}

// Follower is the Book of a replica: the leader's, or local while this
// replica leads.
type Follower struct {
	local Book
	opts  FollowerOptions

	mu    sync.Mutex
	all   map[string]Report
	allAt time.Time
	// writes counts this replica's puts and keeps: an answer of all read
	// across one is not kept (it may miss the write).
	writes int
}

var _ Book = (*Follower)(nil)

// NewFollower returns the Book of a replica whose own is local.
func NewFollower(local Book, opts FollowerOptions) (*Follower, error) {
	if local == nil || opts.Leader == nil {
		return nil, errors.New("linkbook: a local Book and FollowerOptions.Leader are required")
	}
	if opts.Client == nil {
		opts.Client = http.DefaultClient
	}
	if opts.MaxAge <= 0 {
		opts.MaxAge = time.Second
	}
	if opts.Wait <= 0 {
		opts.Wait = 5 * time.Second
	}
	return &Follower{local: local, opts: opts}, nil
}

// Put implements Book.
func (f *Follower) Put(ctx context.Context, hostname string, r Report) error {
	body, err := json.Marshal(putRequest{Hostname: hostname, Report: r})
	if err != nil {
		return err
	}
	self, err := f.ask(ctx, http.MethodPost, "put", body, nil)
	if self {
		return f.local.Put(ctx, hostname, r)
	}
	f.wrote()
	return err
}

// wrote drops the kept answer of all: this replica's next read sees its
// own write.
func (f *Follower) wrote() {
	f.mu.Lock()
	f.all = nil
	f.writes++
	f.mu.Unlock()
}

// Get implements Book.
func (f *Follower) Get(ctx context.Context, hostname string) (Report, bool, error) {
	f.mu.Lock()
	if f.all != nil && time.Since(f.allAt) < f.opts.MaxAge {
		r, ok := f.all[hostname]
		f.mu.Unlock()
		return r, ok, nil
	}
	f.mu.Unlock()
	var a getAnswer
	self, err := f.ask(ctx, http.MethodGet, "get?hostname="+url.QueryEscape(hostname), nil, &a)
	switch {
	case self:
		return f.local.Get(ctx, hostname)
	case err != nil:
		return Report{}, false, err
	case a.Report == nil:
		return Report{}, false, nil
	}
	return *a.Report, true, nil
}

// All implements Book.
func (f *Follower) All(ctx context.Context) (map[string]Report, error) {
	f.mu.Lock()
	if f.all != nil && time.Since(f.allAt) < f.opts.MaxAge {
		all := f.all
		f.mu.Unlock()
		return all, nil
	}
	writes := f.writes
	f.mu.Unlock()
	var all map[string]Report
	self, err := f.ask(ctx, http.MethodGet, "all", nil, &all)
	if self {
		return f.local.All(ctx)
	}
	if err != nil {
		return nil, err
	}
	if all == nil {
		all = map[string]Report{}
	}
	f.mu.Lock()
	if f.writes == writes {
		f.all, f.allAt = all, time.Now()
	}
	f.mu.Unlock()
	return all, nil
}

// Keep implements Book.
func (f *Follower) Keep(ctx context.Context, present map[string]bool) error {
	hostnames := make([]string, 0, len(present))
	for h, ok := range present {
		if ok {
			hostnames = append(hostnames, h)
		}
	}
	body, err := json.Marshal(keepRequest{Present: hostnames})
	if err != nil {
		return err
	}
	self, err := f.ask(ctx, http.MethodPost, "keep", body, nil)
	if self {
		return f.local.Keep(ctx, present)
	}
	f.wrote()
	return err
}

// ask sends one request to the leader's Handler and decodes its answer
// into out; self reports that this replica leads. While no leader
// answers it asks again, for at most Wait.
func (f *Follower) ask(ctx context.Context, method, path string, body []byte, out any) (self bool, _ error) {
	giveUp := time.Now().Add(f.opts.Wait)
	refresh := false
	for {
		target, err := f.opts.Leader(ctx, refresh)
		if err == nil && target.Self {
			return true, nil
		}
		var why error
		switch {
		case err != nil:
			why = err
		case target.URL == "":
			why = errors.New("no replica leads")
		default:
			retry, err := f.send(ctx, method, target.URL+PathPrefix+path, body, out)
			if !retry {
				return false, err
			}
			why = err
		}
		if time.Now().After(giveUp) || ctx.Err() != nil {
			return false, fmt.Errorf("%w: the links: %v", leaderstore.ErrLeaderUnavailable, why)
		}
		refresh = true
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// send makes one attempt; retry reports that the leader did not take it
// (unreachable, or not the leader), so asking again is safe: a report
// replaces the last one whole.
func (f *Follower) send(ctx context.Context, method, url string, body []byte, out any) (retry bool, _ error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return false, err
	}
	req.Header.Set("Authorization", "Bearer "+f.opts.Credential)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := f.opts.Client.Do(req)
	if err != nil {
		return true, err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusServiceUnavailable:
		return true, errors.New("the replica asked does not lead")
	case resp.StatusCode == http.StatusNoContent && out == nil:
		return false, nil
	case resp.StatusCode != http.StatusOK:
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return false, fmt.Errorf("linkbook: the leader answered %s: %s", resp.Status, bytes.TrimSpace(raw))
	}
	if out == nil {
		return false, nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxAllBytes)).Decode(out); err != nil {
		return true, fmt.Errorf("linkbook: the leader's answer: %w", err)
	}
	return false, nil
}
