package joinagent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// installK3s puts the master's k3s at o.K3sBinary when the machine has
// none there: downloaded through the tunnel, checked against the
// SHA-256 the master announces, made executable and moved into place. A
// master that serves none (404) leaves the machine to bring its own.
func (o *Options) installK3s(ctx context.Context) error {
	if _, err := os.Stat(o.K3sBinary); err == nil {
		return nil
	}
	base := o.Master + "/v1/nodes/agent/" + runtime.GOOS + "/" + runtime.GOARCH + "/k3s"
	want, status, err := o.getText(ctx, base+"/sha256")
	switch {
	case err != nil:
		return fmt.Errorf("k3s: reach the master at %s: %w", o.Master, err)
	case status == http.StatusNotFound:
		o.Logger.InfoContext(ctx, "the master serves no k3s for this machine; install k3s here to join Kubernetes", "path", o.K3sBinary)
		return nil
	case status != http.StatusOK:
		return &MasterError{Step: "k3s", Status: status, Message: "GET " + base + "/sha256"}
	}
	want = strings.ToLower(strings.TrimSpace(want))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base, nil)
	if err != nil {
		return err
	}
	client := *o.HTTPClient
	client.Timeout = 0 // large: the context bounds it
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("k3s: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return &MasterError{Step: "k3s", Status: resp.StatusCode, Message: "GET " + base}
	}
	if err := os.MkdirAll(filepath.Dir(o.K3sBinary), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(o.K3sBinary), ".k3s-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(tmp, h), resp.Body); err != nil {
		tmp.Close()
		return fmt.Errorf("k3s: download: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return fmt.Errorf("k3s: the download's SHA-256 is %s, the master announced %s; not installing it", got, want)
	}
	if err := os.Chmod(tmp.Name(), 0o755); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), o.K3sBinary); err != nil {
		return err
	}
	o.Logger.InfoContext(ctx, "k3s installed from the master", "path", o.K3sBinary, "sha256", want)
	return nil
}

// getText GETs a small text answer of the master.
func (o *Options) getText(ctx context.Context, url string) (string, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", 0, err
	}
	resp, err := o.HTTPClient.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return "", 0, errors.Join(err, fmt.Errorf("read %s", url))
	}
	return string(raw), resp.StatusCode, nil
}
