package gridweave

import (
	"context"
	"strconv"
	"time"

	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"gridweave.dev/joinkeys"
)

// metrics are the service's Prometheus metrics, in a registry of its own
// (two Servers in one process do not collide).
type metrics struct {
	registry *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	joins    *prometheus.CounterVec
}

func newMetrics(s *Server) *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gridweave_http_requests_total", Help: "HTTP requests by route pattern, method and status code.",
		}, []string{"method", "route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "gridweave_http_request_duration_seconds", Help: "HTTP request latency by route pattern and method.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"method", "route"}),
		joins: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gridweave_joins_total", Help: "Join-flow calls by step (validate, register, disconnect, leave) and outcome (ok or the error code).",
		}, []string{"step", "outcome"}),
	}
	m.registry.MustRegister(m.requests, m.latency, m.joins,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&ledgerCollector{s: s})
	return m
}

// observe counts a request. Its labels are bounded whatever callers
// send: the method is one of the standard ones or OTHER, the route is a
// pattern of the route table (or "unmatched").
func (m *metrics) observe(method, route string, status int, elapsed time.Duration) {
	method = metricMethod(method)
	m.requests.WithLabelValues(method, route, strconv.Itoa(status)).Inc()
	m.latency.WithLabelValues(method, route).Observe(elapsed.Seconds())
}

// metricMethod is method as a metric label: any method outside the
// standard ones is OTHER, so that callers cannot create series at will.
func metricMethod(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return method
	}
	return "OTHER"
}

func (m *metrics) join(step string, err error) {
	outcome := "ok"
	if err != nil {
		outcome = toAPIError(err).code
	}
	m.joins.WithLabelValues(step, outcome).Inc()
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

// ledgerCollector reports the ledger and the mesh as they are at scrape
// time: nodes by status and WireGuard peers.
type ledgerCollector struct{ s *Server }

var (
	nodesDesc = prometheus.NewDesc("gridweave_nodes", "Nodes in the ledger by status.", []string{"status"}, nil)
	peersDesc = prometheus.NewDesc("gridweave_mesh_peers", "WireGuard peers of the master.", nil, nil)
	linksDesc = prometheus.NewDesc("gridweave_mesh_links", "Links between pairs of nodes by state, as their agents last reported them: direct (machine to machine), relayed (through the master) or connecting.", []string{"state"}, nil)
)

func (c *ledgerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- nodesDesc
	ch <- peersDesc
	ch <- linksDesc
}

func (c *ledgerCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if nodes, err := c.s.keyring.Nodes(ctx); err == nil {
		counts := map[joinkeys.Status]int{joinkeys.StatusValidated: 0, joinkeys.StatusRegistered: 0, joinkeys.StatusDisconnected: 0}
		for _, n := range nodes {
			counts[n.Status]++
		}
		for status, n := range counts {
			ch <- prometheus.MustNewConstMetric(nodesDesc, prometheus.GaugeValue, float64(n), string(status))
		}
	}
	if peers, err := c.s.mesh.Peers(ctx); err == nil {
		ch <- prometheus.MustNewConstMetric(peersDesc, prometheus.GaugeValue, float64(len(peers)))
	}
	for state, n := range c.s.nodes.linkPairs(ctx) {
		ch <- prometheus.MustNewConstMetric(linksDesc, prometheus.GaugeValue, float64(n), string(state))
	}
}
