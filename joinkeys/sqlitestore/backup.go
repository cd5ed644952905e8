package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/mattn/go-sqlite3"
)

// Backup copies the database at src into a new file at dst through
// SQLite's online backup API: a consistent snapshot taken while the server
// keeps writing (in WAL mode its writes go on; the copy sees the database
// as of one transaction). dst must not exist; it is written to a temporary
// file beside it first, checked, then renamed into place.
func Backup(ctx context.Context, src, dst string) error {
	if _, err := os.Stat(src); err != nil {
		return fmt.Errorf("sqlitestore: backup source: %w", err)
	}
	if _, err := os.Stat(dst); err == nil {
		return fmt.Errorf("sqlitestore: backup destination %s exists; choose a new file", dst)
	}
	tmp := filepath.Join(filepath.Dir(dst), "."+filepath.Base(dst)+".partial")
	_ = os.Remove(tmp)
	if err := createPrivate(tmp); err != nil {
		return err
	}
	if err := copyDatabase(ctx, src, tmp, true); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if err := checkStore(ctx, tmp); err != nil {
		removeDatabase(tmp)
		return fmt.Errorf("sqlitestore: the backup does not check out: %w", err)
	}
	return os.Rename(tmp, dst)
}

// createPrivate creates an empty file readable by its owner only, so the
// copy SQLite writes into it is never readable by others.
func createPrivate(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	return f.Close()
}

// removeDatabase removes a database file and its WAL files.
func removeDatabase(path string) {
	for _, suffix := range []string{"", "-wal", "-shm"} {
		_ = os.Remove(path + suffix)
	}
}

// Restore replaces the database at dst with the backup at src. The server
// must be stopped. The backup is copied beside dst (src itself is only
// read) and the copy checked (it opens, its migrations are known, PRAGMA
// integrity_check says ok); then dst's WAL files go and the copy is
// renamed over dst, with dst's owner and a 0600 mode. A missing or broken
// src leaves dst as it was; so does a failure before the rename, and a
// crash between removing the WAL and the rename leaves dst consistent.
func Restore(ctx context.Context, src, dst string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("sqlitestore: the backup: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("sqlitestore: the backup %s is not a file", src)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(dst), "."+filepath.Base(dst)+".restoring")
	removeDatabase(tmp)
	if err := createPrivate(tmp); err != nil {
		return err
	}
	if err := copyDatabase(ctx, src, tmp, false); err != nil {
		removeDatabase(tmp)
		return fmt.Errorf("sqlitestore: %s is not a usable backup: %w", src, err)
	}
	if err := checkStore(ctx, tmp); err != nil {
		removeDatabase(tmp)
		return fmt.Errorf("sqlitestore: %s is not a usable backup: %w", src, err)
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		_ = os.Remove(tmp + suffix)
	}
	if old, err := os.Stat(dst); err == nil {
		if st, ok := old.Sys().(*syscall.Stat_t); ok {
			_ = os.Chown(tmp, int(st.Uid), int(st.Gid))
		}
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		if err := os.Remove(dst + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			removeDatabase(tmp)
			return err
		}
	}
	return os.Rename(tmp, dst)
}

// checkStore opens a database as a Store would (migrations applied,
// which refuses one newer than this build) and runs its integrity check.
func checkStore(ctx context.Context, path string) error {
	s, err := Open(ctx, path, nil)
	if err != nil {
		return err
	}
	defer s.Close()
	return s.IntegrityCheck(ctx)
}

// copyDatabase copies src into the new database file dst with the backup
// API, retrying while src is busy (a writer holds its lock). src is only
// read: a live database (another process writes it) or, not live, a
// backup file that nothing changes.
func copyDatabase(ctx context.Context, src, dst string, live bool) error {
	q := url.Values{}
	q.Set("_busy_timeout", "10000")
	q.Set("mode", "ro")
	if !live {
		q.Set("immutable", "1")
	}
	srcDB, err := sql.Open("sqlite3", "file:"+src+"?"+q.Encode())
	if err != nil {
		return err
	}
	defer srcDB.Close()
	dstDB, err := sql.Open("sqlite3", "file:"+dst)
	if err != nil {
		return err
	}
	defer dstDB.Close()
	srcConn, err := srcDB.Conn(ctx)
	if err != nil {
		return fmt.Errorf("sqlitestore: open %s: %w", src, err)
	}
	defer srcConn.Close()
	dstConn, err := dstDB.Conn(ctx)
	if err != nil {
		return fmt.Errorf("sqlitestore: create %s: %w", dst, err)
	}
	defer dstConn.Close()
	return dstConn.Raw(func(d any) error {
		return srcConn.Raw(func(s any) error {
			to, from := d.(*sqlite3.SQLiteConn), s.(*sqlite3.SQLiteConn)
			b, err := to.Backup("main", from, "main")
			if err != nil {
				return fmt.Errorf("sqlitestore: start backup: %w", err)
			}
			for {
				done, err := b.Step(-1)
				if done {
					break
				}
				var serr sqlite3.Error
				if err != nil && !(errors.As(err, &serr) && (serr.Code == sqlite3.ErrBusy || serr.Code == sqlite3.ErrLocked)) {
					b.Finish()
					return fmt.Errorf("sqlitestore: backup step: %w", err)
				}
				select {
				case <-ctx.Done():
					b.Finish()
					return ctx.Err()
				case <-time.After(10 * time.Millisecond):
				}
			}
			return b.Finish()
		})
	})
}
