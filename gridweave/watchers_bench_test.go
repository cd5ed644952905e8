package gridweave_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gridweave.dev/joinkeys"
)

// BenchmarkDirectoryWatchers: 10,000 registered machines each wait on
// the peer directory (a long poll with delta=true, as the agent does),
// from another process; each op is one more machine joining. join-to-all
// is the time from the join until the last watcher has its answer,
// egress-MB/join what the server wrote to all of them for it (bodies and
// headers), server-KB/watcher what the server process holds per waiting
// watcher (heap and stacks, after a collection). Each join comes once
// every watcher waits again.
//
//	go test -run '^$' -bench BenchmarkDirectoryWatchers -benchtime 3x ./gridweave/
func BenchmarkDirectoryWatchers(b *testing.B) {
	const watchers = 10000
	server, kr := quietServer(b)
	ctx := context.Background()
	m, err := kr.Mint(ctx, joinkeys.MintRequest{Kind: joinkeys.KindOrg, Org: "bench", TTL: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	tokens := make([]string, watchers)
	for i := range watchers {
		j, err := kr.Join(ctx, joinkeys.JoinRequest{Key: m.Secret, Hostname: fmt.Sprintf("w-%05d", i), PublicKey: newNode(b, "x").public})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := kr.Register(ctx, joinkeys.Registration{NodeToken: j.NodeToken, Hostname: j.Node.Hostname}); err != nil {
			b.Fatal(err)
		}
		tokens[i] = j.Node.Hostname + " " + j.NodeToken
	}
	tokenFile := b.TempDir() + "/tokens"
	if err := os.WriteFile(tokenFile, []byte(strings.Join(tokens, "\n")), 0o600); err != nil {
		b.Fatal(err)
	}

	var written atomic.Int64
	var parked atomic.Int64 // connections the server took over: polls that wait
	srv := httptest.NewUnstartedServer(server.Handler())
	srv.Listener = countingListener{Listener: srv.Listener, written: &written}
	srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateHijacked {
			parked.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()

	for range 3 {
		runtime.GC()
	}
	var before runtime.MemStats
	runtime.ReadMemStats(&before)

	child := exec.Command(os.Args[0], "-test.run", "^TestDirectoryWatchersProcess$")
	child.Env = append(os.Environ(), "GRIDWEAVE_WATCHERS_URL="+srv.URL, "GRIDWEAVE_WATCHERS_TOKENS="+tokenFile)
	child.Stderr = os.Stderr
	out, err := child.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := child.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	lines := bufio.NewScanner(out)
	next := func() []string {
		for lines.Scan() {
			if f := strings.Fields(lines.Text()); len(f) > 0 && f[0] == "watchers:" {
				return f[1:]
			}
		}
		b.Fatalf("the watchers' process ended: %v", lines.Err())
		return nil
	}
	if f := next(); f[0] != "waiting" {
		b.Fatalf("the watchers say %v", f)
	}
	// Collections shrink the stacks of parked goroutines, by half each.
	for range 3 {
		runtime.GC()
	}
	var waiting runtime.MemStats
	runtime.ReadMemStats(&waiting)
	heap := float64(int64(waiting.HeapInuse)-int64(before.HeapInuse)) / watchers / 1024
	stacks := float64(int64(waiting.StackInuse)-int64(before.StackInuse)) / watchers / 1024

	var slowest time.Duration
	var egress int64
	b.ResetTimer()
	for i := range b.N {
		// Every watcher waits again (its last answer closed its
		// connection, and it asked again on a new one) before the join.
		for want := int64(watchers) * int64(i+1); parked.Load() < want; {
			time.Sleep(10 * time.Millisecond)
		}
		start, w0 := time.Now(), written.Load()
		if _, err := kr.Join(ctx, joinkeys.JoinRequest{Key: m.Secret, Hostname: fmt.Sprintf("joiner-%05d", i), PublicKey: newNode(b, "x").public}); err != nil {
			b.Fatal(err)
		}
		f := next()
		if f[0] != "answered" {
			b.Fatalf("the watchers say %v", f)
		}
		last, _ := strconv.ParseInt(f[1], 10, 64)
		slowest = max(slowest, time.Unix(0, last).Sub(start))
		egress += written.Load() - w0
	}
	b.StopTimer()
	b.ReportMetric(slowest.Seconds(), "join-to-all-s")
	b.ReportMetric(float64(egress)/float64(b.N)/1e6, "egress-MB/join")
	b.ReportMetric(heap+stacks, "server-KB/watcher")
	b.ReportMetric(heap, "heap-KB/watcher")
	b.ReportMetric(stacks, "stack-KB/watcher")
}

// countingListener counts the bytes written to its connections.
type countingListener struct {
	net.Listener
	written *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countingConn{Conn: c, written: l.written}, nil
}

type countingConn struct {
	net.Conn
	written *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.written.Add(int64(n))
	return n, err
}

// TestDirectoryWatchersProcess is BenchmarkDirectoryWatchers's other
// process (it runs only when that benchmark starts it): one watcher per
// line of the tokens file, each asking the whole directory once, then
// waiting on it with delta=true again and again, a round at a time. It
// says "watchers:
// waiting" once every watcher waits, and "watchers: answered <unix ns>"
// each time every watcher has had an answer, with the time of the last.
func TestDirectoryWatchersProcess(t *testing.T) {
	base, tokenFile := os.Getenv("GRIDWEAVE_WATCHERS_URL"), os.Getenv("GRIDWEAVE_WATCHERS_TOKENS")
	if base == "" {
		return // not started by the benchmark: nothing to do
	}
	raw, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: len(lines), MaxConnsPerHost: 0, DisableCompression: true}}
	ask := func(hostname, token, since string, wait int) (string, error) {
		q := url.Values{"hostname": {hostname}, "since": {since}, "wait": {strconv.Itoa(wait)}, "delta": {"true"}}
		req, _ := http.NewRequest(http.MethodGet, base+"/v1/nodes/peers?"+q.Encode(), nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			body, _ := io.ReadAll(resp.Body)
			return "", fmt.Errorf("%d: %s", resp.StatusCode, body)
		}
		// The revision comes first; the rest (the whole directory on first
		// contact, about 140 bytes a node) is read past.
		dec := json.NewDecoder(resp.Body)
		var revision string
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			return "", fmt.Errorf("the directory is not an object: %v", err)
		}
		if key, err := dec.Token(); err != nil || key != "revision" || dec.Decode(&revision) != nil {
			return "", fmt.Errorf("the directory does not begin with its revision: %v", err)
		}
		_, err = io.Copy(io.Discard, io.MultiReader(dec.Buffered(), resp.Body))
		return revision, err
	}
	// First contact is the whole directory: a few at a time.
	firstContact := make(chan struct{}, 4)
	// Each watcher stands for a machine of its own: it asks again once
	// every watcher has its answer (the round is over), so that what one
	// watcher does with its answer does not delay another's, as it would
	// not across machines.
	var mu sync.Mutex
	var answered int
	var last int64
	round := make(chan struct{})
	var ready sync.WaitGroup
	ready.Add(len(lines))
	for _, line := range lines {
		hostname, token, _ := strings.Cut(line, " ")
		go func() {
			firstContact <- struct{}{}
			since, err := ask(hostname, token, "", 0)
			<-firstContact
			ready.Done()
			for err == nil {
				var rev string
				rev, err = ask(hostname, token, since, 60)
				if err != nil || rev == since {
					continue
				}
				at := time.Now().UnixNano()
				since = rev
				mu.Lock()
				answered++
				last = max(last, at)
				over := round
				if answered == len(lines) {
					fmt.Printf("watchers: answered %d\n", last)
					answered, last = 0, 0
					close(round)
					round = make(chan struct{})
				}
				mu.Unlock()
				<-over
			}
			fmt.Fprintln(os.Stderr, "watcher", hostname, err)
		}()
	}
	ready.Wait()
	time.Sleep(3 * time.Second) // every long poll sent and parked
	fmt.Println("watchers: waiting")
	select {}
}
