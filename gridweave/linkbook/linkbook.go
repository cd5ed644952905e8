package linkbook

import (
	"context"
	"maps"
	"net/netip"
	"sync"
	"time"

	"gridweave.dev/gridweave/api"
)

// Report is a node's last report of its links, as the service accepted it.
type Report struct {
	At         time.Time        `json:"at"`
	ListenPort int              `json:"listen_port,omitempty"`
	Endpoints  []netip.AddrPort `json:"endpoints,omitempty"`
	NAT        api.NATMapping   `json:"nat,omitempty"`
	Links      []api.Link       `json:"links"`
	Counts     api.LinkCounts   `json:"counts"`
}

// Book keeps each node's last Report. It is safe for concurrent use.
type Book interface {
	// Put replaces the report of hostname.
	Put(ctx context.Context, hostname string, r Report) error
	// Get returns the report of hostname; false when there is none.
	Get(ctx context.Context, hostname string) (Report, bool, error)
	// All returns every report, by hostname.
	All(ctx context.Context) (map[string]Report, error)
	// Keep forgets the reports of the hostnames not in present (nodes no
	// longer in the ledger).
	Keep(ctx context.Context, present map[string]bool) error
}

// Memory is a Book in this process. The zero value is empty and ready.
type Memory struct {
	mu      sync.Mutex
	reports map[string]Report
}

var _ Book = (*Memory)(nil)

// Put implements Book.
func (m *Memory) Put(_ context.Context, hostname string, r Report) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.reports == nil {
		m.reports = map[string]Report{}
	}
	m.reports[hostname] = r
	return nil
}

// Get implements Book.
func (m *Memory) Get(_ context.Context, hostname string) (Report, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.reports[hostname]
	return r, ok, nil
}

// All implements Book.
func (m *Memory) All(context.Context) (map[string]Report, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.reports), nil
}

// Keep implements Book.
func (m *Memory) Keep(_ context.Context, present map[string]bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for h := range m.reports {
		if !present[h] {
			delete(m.reports, h)
		}
	}
	return nil
}
