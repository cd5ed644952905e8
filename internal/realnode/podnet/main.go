// Command podnet is the test image's program (internal/realnode's
// TestImage): "podnet serve :8080" answers every HTTP request with the
// pod's name and addresses and logs a line per request; "podnet get URL"
// prints what a URL answers (run by kubectl exec, to reach one pod from
// another); "podnet hold" only waits. It exits on SIGTERM.
package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: podnet serve ADDR | get URL | hold")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	switch os.Args[1] {
	case "serve":
		os.Exit(serve(ctx, os.Args[2]))
	case "get":
		os.Exit(get(os.Args[2]))
	case "hold":
		<-ctx.Done()
	default:
		fmt.Fprintln(os.Stderr, "podnet: unknown command", os.Args[1])
		os.Exit(2)
	}
}

func serve(ctx context.Context, addr string) int {
	name, _ := os.Hostname()
	var addrs []string
	if ifaces, err := net.InterfaceAddrs(); err == nil {
		for _, a := range ifaces {
			if ip, ok := a.(*net.IPNet); ok && !ip.IP.IsLoopback() {
				addrs = append(addrs, ip.IP.String())
			}
		}
	}
	srv := &http.Server{Addr: addr, ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Printf("podnet: %s asked %s\n", r.RemoteAddr, r.URL.Path)
		fmt.Fprintf(w, "pod %s at %s\n", name, strings.Join(addrs, ","))
	})}
	go func() { <-ctx.Done(); _ = srv.Close() }()
	fmt.Printf("podnet: pod %s serving on %s at %s\n", name, addr, strings.Join(addrs, ","))
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		fmt.Fprintln(os.Stderr, "podnet:", err)
		return 1
	}
	return 0
}

func get(url string) int {
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		fmt.Fprintln(os.Stderr, "podnet:", err)
		return 1
	}
	defer resp.Body.Close()
	_, _ = io.Copy(os.Stdout, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return 1
	}
	return 0
}
