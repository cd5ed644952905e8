package gridweave

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"
)

// pollPark holds the long polls of the peer directory that wait, without
// a goroutine, a stack or net/http's buffers each: a waiting poll's
// connection is taken from the HTTP server (hijacked) and answered from
// here, over HTTP/1.1 with Connection: close, when its org's directory
// moves past the revision it holds or its wait is over. What a fleet of
// agents waiting at once costs the master is then the connections
// themselves. A connection the server cannot hand over (HTTP/2, a
// ResponseWriter that hides it) waits in its handler as before.
type pollPark struct {
	answer func(ctx context.Context, org, since string, delta, now bool) ([]byte, <-chan struct{}, error)
	// refresh makes the next answer compute the directory again.
	refresh func()
	log     *slog.Logger

	mu      sync.Mutex
	waiting map[*parkedPoll]struct{}
	running bool
	// probing lets one caller at a time look for polls whose client left.
	probing sync.Mutex
}

// parkedPoll is one waiting long poll.
type parkedPoll struct {
	conn     net.Conn
	header   http.Header // what the middleware set (the request id)
	hostname string
	org      string
	since    string
	delta    bool
	deadline time.Time
	// done gives the node's poll back (pollCount), once.
	done func()
}

// parkWriteTimeout bounds writing one answer to a parked connection, and
// parkAnswerTimeout making the answers of one look (the ledger's and the
// WireGuard device's reads).
const (
	parkWriteTimeout  = 5 * time.Second
	parkAnswerTimeout = 10 * time.Second
)

// park takes w's connection for poll and answers it later; false when the
// connection cannot be taken, and the caller waits in its handler.
func (p *pollPark) park(w http.ResponseWriter, poll *parkedPoll) bool {
	poll.header = w.Header().Clone()
	conn, buffered, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return false
	}
	if buffered.Reader.Buffered() > 0 {
		// The client sent more after this request: it is not an agent
		// waiting; answer it now and close.
		a := p.answerNow(poll)
		p.send(poll, conn, a.body, a.err)
		return true
	}
	poll.conn = conn
	_ = conn.SetDeadline(time.Time{})
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.waiting == nil {
		p.waiting = map[*parkedPoll]struct{}{}
	}
	p.waiting[poll] = struct{}{}
	if !p.running {
		p.running = true
		go p.run()
	}
	return true
}

// run answers the parked polls whose directory moved or whose wait is
// over, looking every directoryMaxAge with the directory computed again
// (refresh), until none waits. The answers of a look are written in the
// background: a slow client holds up no other poll, nor the next look.
func (p *pollPark) run() {
	tick := time.NewTicker(directoryMaxAge)
	defer tick.Stop()
	for range tick.C {
		p.mu.Lock()
		if len(p.waiting) == 0 {
			p.running = false
			p.mu.Unlock()
			return
		}
		polls := make([]*parkedPoll, 0, len(p.waiting))
		for poll := range p.waiting {
			polls = append(polls, poll)
		}
		p.mu.Unlock()
		if due := p.look(polls); len(due) > 0 {
			go p.sendAll(due)
		}
	}
}

// look is one look at polls: the answers of those due, each taken out of
// the park (one a poll answered meanwhile, by answerAll or dropDead, is
// not). A failure is logged and answers no poll.
func (p *pollPark) look(polls []*parkedPoll) (due []dueAnswer) {
	defer func() {
		if v := recover(); v != nil {
			p.log.Error("a look at the parked polls of the peer directory failed", "panic", fmt.Sprint(v))
			due = nil
		}
	}()
	p.refresh()
	ctx, cancel := context.WithTimeout(context.Background(), parkAnswerTimeout)
	defer cancel()
	answers := p.due(ctx, polls, time.Now())
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range answers {
		if _, still := p.waiting[a.poll]; still {
			delete(p.waiting, a.poll)
			due = append(due, a)
		}
	}
	return due
}

// dueAnswer is a parked poll to answer, with its answer.
type dueAnswer struct {
	poll *parkedPoll
	body []byte
	err  error
}

// due are the polls to answer now, with their answers: their wait is over
// (the same revision, when the directory has not moved), or their org's
// directory is not at the revision they hold. Each distinct answer is
// made once.
func (p *pollPark) due(ctx context.Context, polls []*parkedPoll, now time.Time) []dueAnswer {
	type question struct {
		org, since   string
		delta, ended bool
	}
	type reply struct {
		body []byte
		err  error
	}
	replies := map[question]reply{}
	var out []dueAnswer
	for _, poll := range polls {
		q := question{poll.org, poll.since, poll.delta, !now.Before(poll.deadline)}
		r, known := replies[q]
		if !known {
			r.body, _, r.err = p.answer(ctx, q.org, q.since, q.delta, q.ended)
			replies[q] = r
		}
		if r.body != nil || r.err != nil {
			out = append(out, dueAnswer{poll, r.body, r.err})
		}
	}
	return out
}

// sendAll answers polls, a few connections at a time.
func (p *pollPark) sendAll(answers []dueAnswer) {
	work := make(chan dueAnswer)
	var wg sync.WaitGroup
	for range min(len(answers), 16) {
		wg.Go(func() {
			for a := range work {
				p.send(a.poll, a.poll.conn, a.body, a.err)
			}
		})
	}
	for _, a := range answers {
		work <- a
	}
	close(work)
	wg.Wait()
}

// answerNow is poll's answer now: the changes since its revision, or the
// same revision.
func (p *pollPark) answerNow(poll *parkedPoll) dueAnswer {
	ctx, cancel := context.WithTimeout(context.Background(), parkAnswerTimeout)
	defer cancel()
	body, _, err := p.answer(ctx, poll.org, poll.since, poll.delta, true)
	return dueAnswer{poll, body, err}
}

// send writes an answer (body, or err in the contract's shape) to conn
// and closes it.
func (p *pollPark) send(poll *parkedPoll, conn net.Conn, body []byte, err error) {
	// The node's place is free once its answer is decided: it may ask
	// again as soon as it reads it.
	poll.done()
	defer conn.Close()
	status, contentType := http.StatusOK, "application/json"
	if err != nil {
		e := toAPIError(err)
		p.log.Error("a parked poll of the peer directory failed", "hostname", poll.hostname, "err", err)
		status, body = e.status(), e.encoded()
	}
	var out bytes.Buffer
	out.Grow(256 + len(body))
	out.WriteString("HTTP/1.1 " + strconv.Itoa(status) + " " + http.StatusText(status) + "\r\nContent-Type: " + contentType +
		"\r\nCache-Control: no-store\r\nConnection: close\r\nContent-Length: " + strconv.Itoa(len(body)) +
		"\r\nDate: " + time.Now().UTC().Format(http.TimeFormat) + "\r\n")
	for _, h := range []string{"Content-Type", "Cache-Control", "Connection", "Content-Length", "Date"} {
		poll.header.Del(h)
	}
	_ = poll.header.Write(&out)
	out.WriteString("\r\n")
	out.Write(body)
	_ = conn.SetWriteDeadline(time.Now().Add(parkWriteTimeout))
	_, _ = conn.Write(out.Bytes())
}

// answerAll answers every parked poll now.
func (p *pollPark) answerAll() {
	p.mu.Lock()
	polls := make([]*parkedPoll, 0, len(p.waiting))
	for poll := range p.waiting {
		polls = append(polls, poll)
		delete(p.waiting, poll)
	}
	p.mu.Unlock()
	answers := make([]dueAnswer, len(polls))
	for i, poll := range polls {
		answers[i] = p.answerNow(poll)
	}
	p.sendAll(answers)
}

// dropDead closes the parked polls of hostname whose connection its
// client has closed (a restarted agent's old poll), giving their polls
// back; it says how many.
func (p *pollPark) dropDead(hostname string) int {
	p.probing.Lock()
	defer p.probing.Unlock()
	p.mu.Lock()
	var mine []*parkedPoll
	for poll := range p.waiting {
		if poll.hostname == hostname {
			mine = append(mine, poll)
		}
	}
	p.mu.Unlock()
	dropped := 0
	for _, poll := range mine {
		if connAlive(poll.conn) {
			continue
		}
		p.mu.Lock()
		_, still := p.waiting[poll]
		delete(p.waiting, poll)
		p.mu.Unlock()
		if still {
			poll.conn.Close()
			poll.done()
			dropped++
		}
	}
	return dropped
}

// connAlive reports whether a parked connection's client is still there:
// a read that would block (nothing sent, not closed). The deadline is a
// little ahead: one already past fails a read before it is tried.
func connAlive(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	var one [1]byte
	n, err := c.Read(one[:])
	_ = c.SetReadDeadline(time.Time{})
	return n > 0 || errors.Is(err, os.ErrDeadlineExceeded)
}
