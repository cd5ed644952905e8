package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"gridweave.dev/gridweave/api"
	"gridweave.dev/gridweave/tlspin"
	"gridweave.dev/mesh/wgkey"
)

// Options say what to drive.
type Options struct {
	URL, AdminToken string
	Nodes, Clients  int
	GPUs            bool
	Prefix, Version string
	// Pin pins an https server's certificate (the MASTER_PIN of its join
	// command, sha256//...).
	Pin string
}

// Report is what a run measured.
type Report struct {
	Joins, Failed    int
	Elapsed          time.Duration
	FirstTenthPerSec float64
	LastTenthPerSec  float64
	OverallPerSec    float64
	FirstErr         error
	SlowestJoin      time.Duration
	MedianJoin       time.Duration
}

func (r Report) String() string {
	s := fmt.Sprintf("%d joins in %.2fs: %.0f joins/s; first tenth %.0f/s, last tenth %.0f/s (last/first %.2f); a join's median %s, slowest %s",
		r.Joins, r.Elapsed.Seconds(), r.OverallPerSec, r.FirstTenthPerSec, r.LastTenthPerSec, r.LastTenthPerSec/r.FirstTenthPerSec,
		r.MedianJoin.Round(time.Microsecond), r.SlowestJoin.Round(time.Microsecond))
	if r.Failed > 0 {
		s += fmt.Sprintf("; %d failed, the first: %v", r.Failed, r.FirstErr)
	}
	return s
}

var gpuKinds = [][]api.GPU{
	{{Index: 0, Vendor: "nvidia", Name: "NVIDIA H100 80GB HBM3", MemoryMiB: 81559, UUID: "GPU-0"}},
	{{Index: 0, Vendor: "nvidia", Name: "NVIDIA A100-SXM4-80GB", MemoryMiB: 81920, UUID: "GPU-0"}, {Index: 1, Vendor: "nvidia", Name: "NVIDIA A100-SXM4-80GB", MemoryMiB: 81920, UUID: "GPU-1"}},
	{{Index: 0, Vendor: "amd", Name: "AMD Instinct MI300X", MemoryMiB: 196592, UUID: ""}},
}

// Run mints a key and joins o.Nodes machines, o.Clients at a time.
func Run(ctx context.Context, o Options) (Report, error) {
	if o.Nodes <= 0 || o.Clients <= 0 {
		return Report{}, errors.New("nodes and clients must be positive")
	}
	transport := &http.Transport{MaxIdleConnsPerHost: o.Clients}
	if o.Pin != "" {
		pin, err := tlspin.Parse(o.Pin)
		if err != nil {
			return Report{}, err
		}
		transport.TLSClientConfig = tlspin.ClientConfig(pin)
	}
	c := &client{base: strings.TrimRight(o.URL, "/"), http: &http.Client{Timeout: time.Minute, Transport: transport}}
	if o.Version == "" {
		var h api.Health
		if err := c.do(ctx, "GET", "/healthz", "", nil, &h); err != nil {
			return Report{}, err
		}
		o.Version = h.Version
	}
	ttl := int64(3600)
	var key api.MintKeyResponse
	if err := c.do(ctx, "POST", "/v1/nodes/join-keys", o.AdminToken, api.MintKeyRequest{Kind: "org", Org: "load", TTLSeconds: &ttl}, &key); err != nil {
		return Report{}, fmt.Errorf("mint a key: %w", err)
	}
	done := make([]time.Time, 0, o.Nodes)
	took := make([]time.Duration, 0, o.Nodes)
	var mu sync.Mutex
	rep := Report{}
	work := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	for range o.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				t0 := time.Now()
				err := c.join(ctx, o, key.Key, i)
				mu.Lock()
				if err != nil {
					rep.Failed++
					if rep.FirstErr == nil {
						rep.FirstErr = err
					}
				} else {
					done = append(done, time.Now())
					took = append(took, time.Since(t0))
				}
				mu.Unlock()
			}
		}()
	}
feed:
	for i := range o.Nodes {
		select {
		case work <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	rep.Elapsed = time.Since(start)
	rep.Joins = len(done)
	if rep.Joins == 0 {
		return rep, fmt.Errorf("no join succeeded: %v", rep.FirstErr)
	}
	slices.SortFunc(done, func(a, b time.Time) int { return a.Compare(b) })
	slices.Sort(took)
	rep.OverallPerSec = float64(rep.Joins) / rep.Elapsed.Seconds()
	tenth := max(rep.Joins/10, 1)
	rate := func(from, to time.Time, n int) float64 {
		if d := to.Sub(from).Seconds(); d > 0 {
			return float64(n) / d
		}
		return 0
	}
	rep.FirstTenthPerSec = rate(start, done[tenth-1], tenth)
	rep.LastTenthPerSec = rate(done[len(done)-tenth-1], done[len(done)-1], tenth)
	rep.MedianJoin, rep.SlowestJoin = took[len(took)/2], took[len(took)-1]
	return rep, nil
}

type client struct {
	base string
	http *http.Client
}

// join validates and registers machine i.
func (c *client) join(ctx context.Context, o Options, key string, i int) error {
	_, pub, err := wgkey.GeneratePair()
	if err != nil {
		return err
	}
	host := fmt.Sprintf("%s-%d", o.Prefix, i)
	var v api.ValidateResponse
	if err := c.do(ctx, "POST", "/v1/nodes/validate", "", api.ValidateRequest{Key: key, Hostname: host, PublicKey: pub.String(), Version: o.Version}, &v); err != nil {
		return fmt.Errorf("validate %s: %w", host, err)
	}
	reg := api.RegisterRequest{NodeToken: v.NodeToken, Hostname: host, Version: o.Version}
	if o.GPUs {
		reg.GPUs = gpuKinds[i%len(gpuKinds)]
	}
	if err := c.do(ctx, "POST", "/v1/nodes/register", "", reg, nil); err != nil {
		return fmt.Errorf("register %s: %w", host, err)
	}
	return nil
}

func (c *client) do(ctx context.Context, method, path, token string, body, out any) error {
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		var e api.ErrorBody
		_ = json.Unmarshal(data, &e)
		return fmt.Errorf("%s %s: %d %s: %s", method, path, resp.StatusCode, e.Error.Code, e.Error.Message)
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}
