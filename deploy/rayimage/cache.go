package rayimage

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// UnusedEntryAge is how long the cache keeps a root filesystem or an
// image nobody asked for: a build removes the entries of other inputs
// unused for longer. Every use marks an entry used (its file's time),
// at most once an hour.
const UnusedEntryAge = 5 * 24 * time.Hour

// markUsedAfter is how old an entry's time must be before a use moves it.
const markUsedAfter = time.Hour

// markUsed records that path was used at now: the cache's clock is the
// file's modification time.
func markUsed(path string, now time.Time) {
	if info, err := os.Stat(path); err == nil && now.Sub(info.ModTime()) > markUsedAfter {
		_ = os.Chtimes(path, now, now)
	}
}

// pruneCache removes from dir the root filesystems and images unused
// since before now minus UnusedEntryAge, except those of the keys in
// keep (a root filesystem's key, an image entry's name). An entry being
// built or read under its lock is left alone, and a builder waiting for
// that lock finds its entry gone and starts afresh (lockFile). It names
// each entry it removes on progress.
func pruneCache(dir string, keep map[string]bool, now time.Time, progress io.Writer) error {
	if progress == nil {
		progress = io.Discard
	}
	old := func(path string) bool {
		info, err := os.Stat(path)
		return err == nil && now.Sub(info.ModTime()) > UnusedEntryAge
	}
	var errs []error
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	for _, e := range entries {
		key, ok := strings.CutPrefix(e.Name(), "rootfs-")
		if !ok || !e.IsDir() || keep[key] {
			continue
		}
		root := filepath.Join(dir, e.Name())
		// A root filesystem never finished is timed by its directory.
		artefact := filepath.Join(root, "rootfs.tar")
		timed := artefact
		if _, err := os.Stat(timed); err != nil {
			timed = root
		}
		if !old(timed) {
			continue
		}
		removed, err := removeLocked(filepath.Join(root, "lock"), artefact, now, func() error { return os.RemoveAll(root) })
		if err != nil {
			errs = append(errs, err)
		} else if removed {
			fmt.Fprintf(progress, "rayimage: removed %s, unused for more than %s\n", root, UnusedEntryAge)
		}
	}
	images := filepath.Join(dir, "images")
	files, err := os.ReadDir(images)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	// An image entry is timed by its tarball, or without one (a build
	// that died) by the newest of its other files.
	tarballs, others := map[string]time.Time{}, map[string]time.Time{}
	for _, f := range files {
		info, err := f.Info()
		if err != nil {
			continue
		}
		for _, suffix := range imageEntrySuffixes {
			entry, ok := strings.CutSuffix(f.Name(), suffix)
			if !ok {
				continue
			}
			if keep[entry] {
				break
			}
			if suffix == ".tar" {
				tarballs[entry] = info.ModTime()
			} else if info.ModTime().After(others[entry]) {
				others[entry] = info.ModTime()
			}
			break
		}
	}
	for entry, at := range others {
		if _, ok := tarballs[entry]; !ok {
			tarballs[entry] = at
		}
	}
	for entry, at := range tarballs {
		if now.Sub(at) <= UnusedEntryAge {
			continue
		}
		base := filepath.Join(images, entry)
		removed, err := removeLocked(base+".lock", base+".tar", now, func() error {
			var errs []error
			for _, suffix := range imageEntrySuffixes {
				if err := os.Remove(base + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
					errs = append(errs, err)
				}
			}
			return errors.Join(errs...)
		})
		if err != nil {
			errs = append(errs, err)
		} else if removed {
			fmt.Fprintf(progress, "rayimage: removed %s, unused for more than %s\n", base+".tar", UnusedEntryAge)
		}
	}
	return errors.Join(errs...)
}

// imageEntrySuffixes are the files of an image entry.
var imageEntrySuffixes = []string{".tar.partial", ".tar", ".digest", ".lock"}

// removeLocked runs remove holding lock, if nobody holds it and the
// entry's artefact, if there is one now, is still unused once the lock is
// held (a use or a build between the look and the lock keeps the entry).
// It reports whether remove ran.
func removeLocked(lock, artefact string, now time.Time, remove func() error) (bool, error) {
	unlock, ok, err := tryLockFile(lock)
	if err != nil || !ok {
		return false, err
	}
	defer unlock()
	if info, err := os.Stat(artefact); err == nil && now.Sub(info.ModTime()) <= UnusedEntryAge {
		return false, nil
	}
	if err := remove(); err != nil {
		return false, fmt.Errorf("rayimage: remove an unused cache entry: %w", err)
	}
	return true, nil
}

// tryLockFile is lockFile without the wait: ok is false when another
// holds the lock, or the file at path is no longer the one locked (an
// entry removed meanwhile).
func tryLockFile(path string) (unlock func(), ok bool, err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, false, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("rayimage: lock %s: %w", path, err)
	}
	unlock = func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }
	if !heldAtPath(f, path) {
		unlock()
		return nil, false, nil
	}
	return unlock, true, nil
}

// heldAtPath reports whether f is still the file at path.
func heldAtPath(f *os.File, path string) bool {
	held, err := f.Stat()
	if err != nil {
		return false
	}
	atPath, err := os.Stat(path)
	return err == nil && os.SameFile(held, atPath)
}

// maxLockAttempts bounds how often lockFile opens a lock file that keeps
// being removed.
const maxLockAttempts = 100

// lockFile holds an exclusive lock on path until the returned function is
// called. A lock file removed while this waited for it (pruneCache
// removing its entry), or its directory removed before, is not held: it
// opens the file at path again, its directory made anew.
func lockFile(path string) (func(), error) {
	for attempt := 1; ; attempt++ {
		if attempt > maxLockAttempts {
			return nil, fmt.Errorf("rayimage: lock %s: removed under each of %d tries", path, maxLockAttempts)
		}
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
		if errors.Is(err, os.ErrNotExist) {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			f.Close()
			return nil, fmt.Errorf("rayimage: lock %s: %w", path, err)
		}
		if heldAtPath(f, path) {
			return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
		}
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}
}
