package scrapetargets

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// fileSuffix ends every target file; Prometheus is pointed at "<dir>/*.json".
const fileSuffix = ".json"

// tempInfix sits between ".<hostname>.json" and the random part of a
// temporary file's name, so the name never ends in ".json".
const tempInfix = ".tmp-"

// Dir is a directory of file_sd files, one per GPU node. Its methods are
// safe for concurrent use.
type Dir struct {
	path string
	// lock is held (a value sent) by whoever is changing or reading the
	// directory; a channel rather than a mutex so Write can give up when
	// its context ends.
	lock chan struct{}
}

// New returns the Dir at path, creating the directory (mode 0755, with its
// parents) when it is missing, and removing temporary files a crashed
// writer left there. It refuses a path that exists and is not a directory.
func New(path string) (*Dir, error) {
	if path == "" {
		return nil, errors.New("scrapetargets: the targets directory path is empty")
	}
	path = filepath.Clean(path)
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(path, 0o755); err != nil {
			return nil, fmt.Errorf("scrapetargets: creating the targets directory: %w", err)
		}
	case err != nil:
		return nil, fmt.Errorf("scrapetargets: the targets directory: %w", err)
	case !info.IsDir():
		return nil, fmt.Errorf("scrapetargets: the targets directory %s is not a directory (it is a %s)", path, fileKind(info.Mode()))
	}
	d := &Dir{path: path, lock: make(chan struct{}, 1)}
	if err := d.removeTempFiles(); err != nil {
		return nil, err
	}
	return d, nil
}

// Path returns the directory, as given to New (cleaned).
func (d *Dir) Path() string { return d.path }

// Write makes t's file hold t, replacing it atomically. When the file
// already holds exactly that content it is left untouched.
func (d *Dir) Write(ctx context.Context, t Target) error {
	if err := t.Validate(); err != nil {
		return err
	}
	content, err := encode(t)
	if err != nil {
		return err
	}
	select {
	case d.lock <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("scrapetargets: writing the target of node %q: %w", t.Hostname, context.Cause(ctx))
	}
	defer func() { <-d.lock }()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("scrapetargets: writing the target of node %q: %w", t.Hostname, context.Cause(ctx))
	}

	final := d.file(t.Hostname)
	if current, err := os.ReadFile(final); err == nil && bytes.Equal(current, content) {
		return nil
	}
	if err := d.replace(t.Hostname, content); err != nil {
		return fmt.Errorf("scrapetargets: writing the target of node %q: %w", t.Hostname, err)
	}
	return nil
}

// Remove deletes the file of the node named hostname. A file that is not
// there is not an error.
func (d *Dir) Remove(hostname string) error {
	if err := ValidateHostname(hostname); err != nil {
		return err
	}
	d.lock <- struct{}{}
	defer func() { <-d.lock }()

	err := os.Remove(d.file(hostname))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("scrapetargets: removing the target of node %q: %w", hostname, err)
	}
	if err := syncDir(d.path); err != nil {
		return fmt.Errorf("scrapetargets: removing the target of node %q: %w", hostname, err)
	}
	return nil
}

// List returns the targets in the directory, sorted by hostname. It reads
// the files named <hostname>.json and ignores every other entry; a target
// written with Port 0 comes back with DefaultPort. A <hostname>.json that
// does not hold what Write writes is an error wrapping ErrMalformedFile
// (Write or Remove replaces it).
func (d *Dir) List() ([]Target, error) {
	d.lock <- struct{}{}
	defer func() { <-d.lock }()

	entries, err := os.ReadDir(d.path) // sorted by name
	if err != nil {
		return nil, fmt.Errorf("scrapetargets: listing the targets: %w", err)
	}
	var targets []Target
	for _, e := range entries {
		hostname, ok := strings.CutSuffix(e.Name(), fileSuffix)
		if !ok || !e.Type().IsRegular() || ValidateHostname(hostname) != nil {
			continue
		}
		content, err := os.ReadFile(filepath.Join(d.path, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("scrapetargets: listing the targets: %w", err)
		}
		t, err := decode(hostname, content)
		if err != nil {
			return nil, fmt.Errorf("scrapetargets: listing the targets in %s: %w", d.path, err)
		}
		targets = append(targets, t)
	}
	return targets, nil
}

// file is the path of the node's file_sd file.
func (d *Dir) file(hostname string) string {
	return filepath.Join(d.path, hostname+fileSuffix)
}

// replace writes content to a temporary file beside the node's file,
// flushes it, renames it over the node's file and flushes the directory.
// On error the temporary file is removed and the node's file is as before.
func (d *Dir) replace(hostname string, content []byte) (err error) {
	tmp, err := os.CreateTemp(d.path, "."+hostname+fileSuffix+tempInfix+"*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(content); err != nil {
		return err
	}
	// CreateTemp makes the file 0600; Prometheus often runs as another user.
	if err := tmp.Chmod(0o644); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), d.file(hostname)); err != nil {
		return err
	}
	return syncDir(d.path)
}

// removeTempFiles deletes the temporary files Write makes
// (".<hostname>.json.tmp-<random>") that a crashed writer left behind.
func (d *Dir) removeTempFiles() error {
	entries, err := os.ReadDir(d.path)
	if err != nil {
		return fmt.Errorf("scrapetargets: reading the targets directory: %w", err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || !isTempFile(e.Name()) {
			continue
		}
		if err := os.Remove(filepath.Join(d.path, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("scrapetargets: removing a leftover temporary file: %w", err)
		}
	}
	return nil
}

// isTempFile reports whether name is one of Write's temporary files.
func isTempFile(name string) bool {
	rest, ok := strings.CutPrefix(name, ".")
	if !ok {
		return false
	}
	hostname, _, ok := strings.Cut(rest, fileSuffix+tempInfix)
	return ok && ValidateHostname(hostname) == nil
}

// syncDir flushes the directory itself, so a rename or removal in it
// survives a crash of the machine.
func syncDir(path string) error {
	dir, err := os.Open(path)
	if err != nil {
		return err
	}
	if err := dir.Sync(); err != nil {
		dir.Close()
		return fmt.Errorf("flushing directory %s: %w", path, err)
	}
	return dir.Close()
}

// fileKind names what a non-directory path is, for error messages.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "regular file"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "file of mode " + m.String()
}
