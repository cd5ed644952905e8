package childproc

import (
	"os/exec"
	"runtime"
	"syscall"
)

// Start starts cmd so that the kernel kills it (SIGKILL) if the test
// process dies without stopping it, and returns a channel that receives
// cmd.Wait's result once it has exited.
//
// PR_SET_PDEATHSIG fires when the forking *thread* exits, not the process.
// A Go program ends OS threads whenever a goroutine that locked one exits
// (as netnstest.Do does to enter a namespace), so a child forked from an
// arbitrary thread may be killed at any moment. Start forks from a
// goroutine locked to its thread that lives until the child has exited.
func Start(cmd *exec.Cmd) (<-chan error, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	started, exited := make(chan error, 1), make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the child
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		exited <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return exited, nil
}
