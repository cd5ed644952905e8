// Command pause is the sandbox container of every pod on a Gridweave
// machine: it holds the pod's namespaces, reaps the children it inherits
// as PID 1, and exits on SIGINT or SIGTERM, as Kubernetes' own pause does
// (build/pause/linux/pause.c). It is built static and packed into the
// pause image by deploy/image (PauseImage), so a machine with no registry
// in reach still starts pods.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		os.Stdout.WriteString("pause (gridweave)\n")
		return
	}
	if os.Getpid() != 1 {
		os.Stderr.WriteString("warning: pause should be the first process\n")
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	children := make(chan os.Signal, 16)
	signal.Notify(children, syscall.SIGCHLD)
	for {
		select {
		case <-stop:
			os.Exit(0)
		case <-children:
			for {
				pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
		}
	}
}
