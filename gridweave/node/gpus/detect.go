package gpus

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"strings"
	"time"
)

// Options configures Detect. A nil *Options, and every zero field, means
// the default.
type Options struct {
	// LookPath finds a tool by name; an error wrapping exec.ErrNotFound
	// means the tool is not installed. Default: exec.LookPath.
	LookPath func(file string) (string, error)
	// Run runs a tool and returns its standard output. A tool that exits
	// non-zero is an error; Run may return the output it got all the same.
	// Default: os/exec, with the last lines of standard error in the error.
	Run func(ctx context.Context, name string, args ...string) ([]byte, error)
	// Timeout bounds each run of a tool. Default: 30 seconds (nvidia-smi
	// can take seconds per GPU when persistence mode is off).
	Timeout time.Duration
	// Logger receives a debug line per tool run. Default: discard.
	Logger *slog.Logger
}

// DefaultTimeout is the Timeout used when Options.Timeout is zero.
const DefaultTimeout = 30 * time.Second

func (o *Options) withDefaults() Options {
	var opts Options
	if o != nil {
		opts = *o
	}
	if opts.LookPath == nil {
		opts.LookPath = exec.LookPath
	}
	if opts.Run == nil {
		opts.Run = runCommand
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return opts
}

// Detect reports the GPUs of this machine. If nvidia-smi is installed, it
// returns what nvidia-smi lists, or an error; otherwise, if amd-smi is
// installed, what amd-smi lists, or an error; otherwise nil and no error
// (a CPU-only machine). An installed tool that fails is an error wrapping
// ErrToolFailed, one that lists no GPU an error wrapping ErrNoGPUs, and
// output that does not parse a *ParseError; Detect never turns any of them
// into a CPU-only answer.
func Detect(ctx context.Context, o *Options) ([]GPU, error) {
	opts := o.withDefaults()
	tools := []struct {
		name  string
		args  []string
		parse func([]byte) ([]GPU, error)
	}{
		{"nvidia-smi", nvidiaSMIArgs, ParseNvidiaSMI},
		{"amd-smi", amdSMIArgs, ParseAMDSMI},
	}
	for _, tool := range tools {
		path, err := opts.LookPath(tool.name)
		if errors.Is(err, exec.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("gpus: looking for %s: %w", tool.name, err)
		}
		runCtx, cancel := context.WithTimeout(ctx, opts.Timeout)
		out, err := opts.Run(runCtx, path, tool.args...)
		if ctxErr := runCtx.Err(); err != nil && ctxErr != nil {
			err = fmt.Errorf("%w (timeout %v): %w", ctxErr, opts.Timeout, err)
		}
		cancel()
		opts.Logger.DebugContext(ctx, "gpus: ran GPU tool", "tool", path, "args", tool.args, "bytes", len(out), "err", err)
		if err != nil {
			return nil, runFailure(tool.name, path, out, err)
		}
		gpus, err := tool.parse(out)
		if err != nil {
			return nil, err
		}
		return gpus, nil
	}
	opts.Logger.DebugContext(ctx, "gpus: neither nvidia-smi nor amd-smi is installed; CPU-only")
	return nil, nil
}

// runFailure explains why an installed tool did not run to completion.
func runFailure(tool, path string, out []byte, err error) error {
	said := string(out) + "\n" + err.Error()
	var failure error
	switch {
	case strings.Contains(said, nvidiaNoDevices):
		failure = fmt.Errorf("gpus: %s is installed but found no devices (%w): %w", tool, ErrNoGPUs, err)
	case strings.Contains(said, nvidiaDriverFailure):
		failure = fmt.Errorf("gpus: %s is installed but cannot talk to the NVIDIA driver; is the driver loaded? (%w: %w)", tool, ErrToolFailed, err)
	default:
		failure = fmt.Errorf("gpus: %s (%s) is installed but failed (%w: %w)", tool, path, ErrToolFailed, err)
	}
	if detail := lastLines(out); detail != "" {
		failure = fmt.Errorf("%w; it printed: %s", failure, detail)
	}
	return failure
}

// runCommand runs name with os/exec and returns its standard output. If it
// fails, the error carries the last lines of its standard error.
func runCommand(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.WaitDelay = time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	err := cmd.Run()
	if err != nil {
		if detail := lastLines(stderr.Bytes()); detail != "" {
			err = fmt.Errorf("%w: %s", err, detail)
		}
	}
	return stdout.Bytes(), err
}

// lastLines returns the last few non-blank lines of a tool's output, joined
// and shortened for an error message: where tools put their complaint, after
// any warnings.
func lastLines(b []byte) string {
	const maxLines, maxLen = 3, 300
	var lines []string
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			lines = append(lines, line)
		}
	}
	if len(lines) > maxLines {
		lines = lines[len(lines)-maxLines:]
	}
	s := strings.Join(lines, " | ")
	if len(s) > maxLen {
		s = s[:maxLen] + "..."
	}
	return s
}
