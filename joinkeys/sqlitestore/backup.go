package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
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
	if err := copyDatabase(ctx, src, tmp, true); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if err := checkStore(ctx, tmp); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("sqlitestore: the backup does not check out: %w", err)
	}
	return os.Rename(tmp, dst)
}

// Restore replaces the database at dst with the backup at src. The server
// must be stopped. The backup is checked first (it opens, its migrations
// are known, PRAGMA integrity_check says ok); then the restored copy is
// written beside dst and renamed over it, and dst's WAL files go, so a
// failure leaves dst as it was.
func Restore(ctx context.Context, src, dst string) error {
	if err := checkStore(ctx, src); err != nil {
		return fmt.Errorf("sqlitestore: %s is not a usable backup: %w", src, err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(dst), "."+filepath.Base(dst)+".restoring")
	_ = os.Remove(tmp)
	if err := copyDatabase(ctx, src, tmp, false); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		return err
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		if err := os.Remove(dst + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
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
// API, retrying while src is busy (a writer holds its lock).
func copyDatabase(ctx context.Context, src, dst string, live bool) error {
	q := url.Values{}
	q.Set("_busy_timeout", "10000")
	if live {
		q.Set("mode", "ro")
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
