package testcluster

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// process is one supervised child: its command, its log file and a channel
// closed when it has exited (and been reaped).
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	logFile *os.File
	exited  chan struct{}
	waitErr error
}

// PID returns the child's process id.
func (p *process) PID() int { return p.cmd.Process.Pid }

// running reports whether the child has not exited yet.
func (p *process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// spawner starts children from one goroutine locked to one OS thread.
// Children get PR_SET_PDEATHSIG=SIGKILL, which the kernel delivers when the
// *thread* that forked them exits; keeping that thread alive for the life of
// the cluster, and only for it, means children die with the test binary
// (even on SIGKILL or a panic) and never earlier.
type spawner struct {
	requests chan spawnRequest
	done     chan struct{}
	once     sync.Once
}

type spawnRequest struct {
	cmd   *exec.Cmd
	reply chan error
}

func newSpawner() *spawner {
	s := &spawner{requests: make(chan spawnRequest), done: make(chan struct{})}
	go func() {
		runtime.LockOSThread()
		// Deliberately never unlocked: when this goroutine returns, the
		// thread exits with it, after all children were stopped.
		for {
			select {
			case req := <-s.requests:
				req.reply <- req.cmd.Start()
			case <-s.done:
				return
			}
		}
	}()
	return s
}

func (s *spawner) start(cmd *exec.Cmd) error {
	reply := make(chan error, 1)
	select {
	case s.requests <- spawnRequest{cmd: cmd, reply: reply}:
		return <-reply
	case <-s.done:
		return errors.New("cluster is stopped")
	}
}

func (s *spawner) close() { s.once.Do(func() { close(s.done) }) }

// startProcess launches binary with args, its output appended to
// logDir/<name>.log.
func (s *spawner) startProcess(name, logDir, binary string, args []string, env []string) (*process, error) {
	logPath := filepath.Join(logDir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(logFile, "==== %s %s\n", binary, strings.Join(args, " "))
	cmd := exec.Command(binary, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := s.start(cmd); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, logFile: logFile, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()
	return p, nil
}

// stop asks the child to terminate, and kills it if it has not exited
// within grace. It signals the child's own PID only.
func (p *process) stop(grace time.Duration) {
	if !p.running() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return
	case <-time.After(grace):
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// tail returns the last max bytes of the child's log.
func (p *process) tail(max int64) string {
	f, err := os.Open(p.logPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > max {
		_, _ = f.Seek(st.Size()-max, io.SeekStart)
	}
	var b bytes.Buffer
	_, _ = io.Copy(&b, f)
	return b.String()
}

// exitError describes how an exited child ended, with the end of its log.
func (p *process) exitError() error {
	return fmt.Errorf("%s exited (%v); last log lines:\n%s", p.name, p.waitErr, p.tail(4096))
}
