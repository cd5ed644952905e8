package joinkeys

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// The audit trail is bounded twice over. Rejected attempts (a validate or
// register refused) are aggregated before they are written: the first of
// each hostname and reason in a minute is an event, the repeats one more
// event with their count when the minute is over, and past
// RejectionsPerMinute distinct ones in a minute the rest are counted in a
// single event. Then CompactAudit, which the server's leader runs, prunes
// the trail to Options.AuditRetention. A machine posting validates with
// random keys and hostnames thus writes a few events a minute, not one
// per request, and the trail never outgrows its bounds.

// rejectionWindow is the span over which rejected attempts are
// aggregated.
const rejectionWindow = time.Minute

// DefaultRejectionsPerMinute is how many distinct rejected attempts (by
// hostname and reason) a Keyring writes in a minute unless
// Options.RejectionsPerMinute says otherwise.
const DefaultRejectionsPerMinute = 60

// maxReasonLen bounds a rejection's reason as aggregated and stored.
const maxReasonLen = 300

// maxCountedHosts bounds the hostnames a minute's overflow remembers to
// count them: past it the summary says "at least".
const maxCountedHosts = 10_000

type rejectionKey struct{ hostname, reason string }

// rejections aggregates rejected attempts per window.
type rejections struct {
	mu       sync.Mutex
	start    time.Time // of the current window; zero before the first
	seen     map[rejectionKey]*repeated
	written  int // distinct rejections written in the window
	overflow int // rejections past the window's cap
	hosts    map[string]bool
}

type repeated struct {
	first AuditEvent
	more  int
}

// record takes one rejected attempt: it returns the events to write now
// (the attempt itself when it is new in the window, and the summaries of
// the window before when this one opens a new window).
func (r *rejections) record(e AuditEvent, perMinute int) []AuditEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.flushLocked(e.At)
	k := rejectionKey{e.Hostname, e.Reason}
	if c, ok := r.seen[k]; ok {
		c.more++
		return out
	}
	if r.written >= perMinute {
		r.overflow++
		if len(r.hosts) < maxCountedHosts {
			r.hosts[e.Hostname] = true
		}
		return out
	}
	r.seen[k] = &repeated{first: e}
	r.written++
	return append(out, e)
}

// flush returns the summaries of a window that is over by now.
func (r *rejections) flush(now time.Time) []AuditEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.flushLocked(now)
}

func (r *rejections) flushLocked(now time.Time) []AuditEvent {
	if !r.start.IsZero() && now.Before(r.start.Add(rejectionWindow)) {
		return nil
	}
	var out []AuditEvent
	for _, c := range r.seen {
		if c.more == 0 {
			continue
		}
		e := c.first
		e.At = now
		e.Reason = clip(fmt.Sprintf("%d more times in the minute from %s: %s", c.more, r.start.Format(time.RFC3339), c.first.Reason))
		out = append(out, e)
	}
	if r.overflow > 0 {
		hosts := fmt.Sprint(len(r.hosts))
		if len(r.hosts) >= maxCountedHosts {
			hosts = "at least " + hosts
		}
		out = append(out, AuditEvent{At: now, Type: EventValidationRejected, Actor: "gridweave",
			Reason: fmt.Sprintf("%d more rejected attempts from %s hostnames in the minute from %s, past the %d a minute recorded one by one",
				r.overflow, hosts, r.start.Format(time.RFC3339), r.written)})
	}
	r.start, r.seen, r.written, r.overflow, r.hosts = now, map[rejectionKey]*repeated{}, 0, 0, map[string]bool{}
	return out
}

func clip(s string) string {
	if len(s) > maxReasonLen {
		return s[:maxReasonLen-3] + "..."
	}
	return s
}

// auditRejected records a rejected attempt, aggregated (see above).
func (k *Keyring) auditRejected(ctx context.Context, e AuditEvent) {
	e.At = k.now().UTC()
	e.Reason = clip(e.Reason)
	for _, w := range k.rejected.record(e, k.rejectionsPerMinute) {
		k.write(ctx, w)
	}
}

// FlushRejections writes the summaries of a minute of rejected attempts
// that is over. Every server that takes joins calls it every minute or so
// (CompactAudit does it too), so that a minute's counts are written within
// about a minute, whether or not another attempt comes.
func (k *Keyring) FlushRejections(ctx context.Context) {
	for _, e := range k.rejected.flush(k.now().UTC()) {
		k.write(ctx, e)
	}
}

// FlushAllRejections writes the summaries of every rejected attempt still
// counted, the current minute's too: what a server does as it stops.
func (k *Keyring) FlushAllRejections(ctx context.Context) {
	for _, e := range k.rejected.flush(k.now().UTC().Add(rejectionWindow)) {
		e.At = k.now().UTC()
		k.write(ctx, e)
	}
}

// CompactAudit writes the summaries of a minute of rejected attempts that
// is over and prunes the trail to Options.AuditRetention. One server (the
// leader, when several share a ledger) calls it every minute or so; it
// returns how many events went.
func (k *Keyring) CompactAudit(ctx context.Context) (int, error) {
	k.FlushRejections(ctx)
	n, err := k.store.PruneAudit(ctx, k.retention, k.now().UTC())
	if n > 0 {
		k.log.InfoContext(ctx, "audit trail pruned", "events_removed", n)
	}
	return n, err
}

// Retained returns the events of trail (oldest first, by ID) that r keeps
// as of now, in order: for a store that prunes by reading its trail.
func Retained(trail []AuditEvent, r AuditRetention, now time.Time) []AuditEvent {
	keep := make([]bool, len(trail))
	type class struct {
		host     string
		rejected bool
	}
	perHost := map[class]int{}
	total := map[bool]int{}
	bound := map[bool]int{false: r.MaxEvents, true: r.MaxRejected}
	kept := 0
	for i := len(trail) - 1; i >= 0; i-- { // newest first
		e := trail[i]
		rejected := e.Type == EventValidationRejected
		if r.MaxAge > 0 && e.At.Before(now.Add(-r.MaxAge)) {
			continue
		}
		if e.Hostname != "" && r.MaxPerHostname > 0 {
			c := class{e.Hostname, rejected}
			if perHost[c] >= r.MaxPerHostname {
				continue
			}
			perHost[c]++
		}
		if bound[rejected] > 0 && total[rejected] >= bound[rejected] {
			continue
		}
		total[rejected]++
		kept++
		keep[i] = true
	}
	out := make([]AuditEvent, 0, kept)
	for i, e := range trail {
		if keep[i] {
			out = append(out, e)
		}
	}
	return out
}
