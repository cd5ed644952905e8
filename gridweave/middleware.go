package gridweave

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"gridweave.dev/gridweave/api"
)

// middleware wraps a handler; the server composes them once, in routes.go.
type middleware func(http.Handler) http.Handler

func chain(h http.Handler, m ...middleware) http.Handler {
	for i := len(m) - 1; i >= 0; i-- {
		h = m[i](h)
	}
	return h
}

type requestIDKey struct{}

func requestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// withRequestID takes the caller's X-Request-Id when it is a sane token,
// else makes one, and echoes it on the response.
func withRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if !saneRequestID(id) {
			var b [8]byte
			_, _ = rand.Read(b[:])
			id = hex.EncodeToString(b[:])
		}
		w.Header().Set("X-Request-Id", id)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestIDKey{}, id)))
	})
}

func saneRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for _, c := range []byte(id) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-_.:", c) >= 0) {
			return false
		}
	}
	return true
}

// routeInfo is filled by the route that served a request, for the access
// log and the metrics of the middleware around the mux.
type routeInfo struct{ pattern string }

type routeInfoKey struct{}

// statusRecorder remembers the status a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Flush lets streamed answers (logs with follow) reach the client.
func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// withAccessLog logs one line per request (never a header or a body) and
// counts it in the metrics; a panic becomes a 500.
func (s *Server) withAccessLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := s.now()
		info := &routeInfo{}
		rec := &statusRecorder{ResponseWriter: w}
		r = r.WithContext(context.WithValue(r.Context(), routeInfoKey{}, info))
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.logFor(r).ErrorContext(r.Context(), "handler panicked", "panic", fmt.Sprint(p))
				if rec.status == 0 {
					s.writeError(rec, r, fmt.Errorf("panic: %v", p))
				}
			}
			status := rec.status
			if status == 0 {
				status = http.StatusOK
			}
			route := info.pattern
			if route == "" {
				route = "unmatched"
			}
			elapsed := s.now().Sub(start)
			s.metrics.observe(r.Method, route, status, elapsed)
			s.logFor(r).InfoContext(r.Context(), "request", "method", r.Method, "route", route, "status", status,
				"duration_ms", float64(elapsed.Microseconds())/1000, "remote", clientIP(r))
		}()
		next.ServeHTTP(rec, r)
	})
}

// withBodyLimit refuses a declared Content-Length over the limit before
// the body is read (so a client waiting on Expect: 100-continue gets the
// 413 at once) and caps what a handler can read.
func (s *Server) withBodyLimit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		limit := s.cfg.MaxBodyBytes
		if r.URL.Path == kubetorchSyncPath {
			// A code bundle: its own bound (and a multipart envelope).
			limit = s.cfg.KubeTorchMaxBundle + 64<<10
		}
		if r.ContentLength > limit {
			w.Header().Set("Connection", "close")
			s.writeError(w, r, bodyTooLarge(limit))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		next.ServeHTTP(w, r)
	})
}

func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// rateKey is the bucket a client address draws from: an IPv4 address its
// own, an IPv6 address its /64 (a host holds a whole /64 and could
// otherwise draw from 2^64 buckets).
func rateKey(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil || a.Unmap().Is4() {
		return ip
	}
	p, _ := a.Prefix(64)
	return p.String()
}

// rateLimiter keeps one token bucket per client (rateKey): refilled at
// perMinute/60 tokens a second, holding at most perMinute. Idle buckets
// (full again) are dropped, so memory follows the active clients.
type rateLimiter struct {
	perMinute int
	now       func() time.Time

	mu        sync.Mutex
	buckets   map[string]*rate.Limiter
	lastSweep time.Time
}

func newRateLimiter(perMinute int, now func() time.Time) *rateLimiter {
	return &rateLimiter{perMinute: perMinute, now: now, buckets: map[string]*rate.Limiter{}}
}

// allow takes a token for ip, or says how long until one is there.
func (l *rateLimiter) allow(ip string) (ok bool, retryAfter time.Duration) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.lastSweep) > time.Minute {
		for k, b := range l.buckets {
			if b.TokensAt(now) >= float64(l.perMinute) {
				delete(l.buckets, k)
			}
		}
		l.lastSweep = now
	}
	b := l.buckets[ip]
	if b == nil {
		b = rate.NewLimiter(rate.Limit(float64(l.perMinute)/60), l.perMinute)
		l.buckets[ip] = b
	}
	res := b.ReserveN(now, 1)
	if delay := res.DelayFrom(now); delay > 0 {
		res.CancelAt(now)
		return false, delay
	}
	return true, 0
}

// withRateLimit answers 429 with Retry-After once a client IP's bucket is
// empty. Only /healthz is exempt (loopback is not).
func (s *Server) withRateLimit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			next.ServeHTTP(w, r)
			return
		}
		if ok, wait := s.limiter.allow(rateKey(clientIP(r))); !ok {
			secs := int(math.Ceil(wait.Seconds()))
			w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
			s.writeError(w, r, &apiError{code: api.CodeRateLimited,
				message: fmt.Sprintf("more than %d requests a minute from %s; retry after %d s", s.cfg.RateLimitPerMinute, clientIP(r), max(secs, 1))})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// withCORS grants cross-origin access to the configured origins ("*" for
// any) and answers preflight requests itself.
func (s *Server) withCORS(next http.Handler) http.Handler {
	any := slices.Contains(s.cfg.CORSOrigins, "*")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" {
			next.ServeHTTP(w, r)
			return
		}
		allowed := any || slices.Contains(s.cfg.CORSOrigins, origin)
		if allowed {
			if any {
				w.Header().Set("Access-Control-Allow-Origin", "*")
			} else {
				w.Header().Set("Access-Control-Allow-Origin", origin)
				w.Header().Add("Vary", "Origin")
			}
			w.Header().Set("Access-Control-Expose-Headers", "X-Request-Id, Retry-After, WWW-Authenticate")
		}
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			if allowed {
				w.Header().Set("Access-Control-Allow-Methods", "GET, POST, PUT, PATCH, DELETE, OPTIONS")
				w.Header().Set("Access-Control-Allow-Headers", "Authorization, Content-Type, X-Request-Id")
				w.Header().Set("Access-Control-Max-Age", "600")
			}
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}
