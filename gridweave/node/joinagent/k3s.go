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
	_, err := o.installFromMaster(ctx, "k3s", o.K3sBinary, false)
	return err
}

// installFromMaster puts the master's binary name (k3s, kubelet) at path:
// downloaded through the tunnel, checked against the SHA-256 the master
// announces, made executable and moved into place. A binary already at
// path is kept, unless replace is set and the master's differs. installed
// is false when the master serves none (404): the machine brings its own.
func (o *Options) installFromMaster(ctx context.Context, name, path string, replace bool) (installed bool, err error) {
	_, statErr := os.Stat(path)
	if statErr == nil && !replace {
		return true, nil
	}
	base := o.Master + "/v1/nodes/agent/" + runtime.GOOS + "/" + runtime.GOARCH + "/" + name
	want, status, err := o.getText(ctx, base+"/sha256")
	switch {
	case err != nil:
		return false, fmt.Errorf("%s: reach the master at %s: %w", name, o.Master, err)
	case status == http.StatusNotFound:
		o.Logger.InfoContext(ctx, "the master serves no "+name+" for this machine", "path", path)
		return statErr == nil, nil
	case status != http.StatusOK:
		return false, &MasterError{Step: name, Status: status, Message: "GET " + base + "/sha256"}
	}
	want = strings.ToLower(strings.TrimSpace(want))
	if statErr == nil {
		if have, err := fileSHA256(path); err == nil && have == want {
			return true, nil
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base, nil)
	if err != nil {
		return false, err
	}
	client := *o.HTTPClient
	client.Timeout = 0 // large: the context bounds it
	resp, err := client.Do(req)
	if err != nil {
		return false, fmt.Errorf("%s: %w", name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, &MasterError{Step: name, Status: resp.StatusCode, Message: "GET " + base}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return false, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+name+"-*")
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(tmp, h), resp.Body); err != nil {
		tmp.Close()
		return false, fmt.Errorf("%s: download: %w", name, err)
	}
	if err := tmp.Close(); err != nil {
		return false, err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return false, fmt.Errorf("%s: the download's SHA-256 is %s, the master announced %s; not installing it", name, got, want)
	}
	if err := os.Chmod(tmp.Name(), 0o755); err != nil {
		return false, err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return false, err
	}
	o.Logger.InfoContext(ctx, name+" installed from the master", "path", path, "sha256", want)
	return true, nil
}

// fileSHA256 is the hex SHA-256 of the file at path.
func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
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
