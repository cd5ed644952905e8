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
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// ImageRuntime is the node's container runtime, as far as the worker
// image step needs it: whether an image is there, and importing one from
// a tarball.
type ImageRuntime interface {
	Has(ctx context.Context, name string) (bool, error)
	Import(ctx context.Context, tarball string) error
}

// imageRecord is the file in the state directory naming the SHA-256 of
// the last worker image tarball this node imported.
const imageRecord = "worker-image.sha256"

// workerImage makes the master's GPU worker image present in the node's
// container runtime: it asks the master for the image's name and SHA-256,
// skips when this node already imported that tarball and the runtime
// still has the image, else downloads it (checking the SHA-256) and
// imports it. A master that serves no image is not an error: the nodes
// pull the image themselves then.
func (o *Options) workerImage(ctx context.Context, images ImageRuntime) error {
	name, sum, err := o.announcedImage(ctx)
	if err != nil || name == "" {
		return err
	}
	record := filepath.Join(o.StateDir, imageRecord)
	if prev, _ := os.ReadFile(record); strings.TrimSpace(string(prev)) == sum {
		has, err := images.Has(ctx, name)
		if err != nil {
			return fmt.Errorf("look for %s in the container runtime: %w", name, err)
		}
		if has {
			o.Logger.InfoContext(ctx, "worker image already present", "image", name, "sha256", sum)
			return nil
		}
	}
	tarball, err := o.downloadImage(ctx, sum)
	if err != nil {
		return err
	}
	defer os.Remove(tarball)
	// The runtime may still be starting (the k3s agent brings containerd
	// up): retry for a bounded time.
	deadline := time.Now().Add(o.ImageImportWait)
	for {
		err = images.Import(ctx, tarball)
		if err == nil || time.Now().After(deadline) {
			break
		}
		o.Logger.InfoContext(ctx, "worker image import failed; retrying", "error", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
	if err != nil {
		return fmt.Errorf("import %s into the container runtime: %w", name, err)
	}
	if err := os.WriteFile(record, []byte(sum+"\n"), 0o600); err != nil {
		return err
	}
	o.Logger.InfoContext(ctx, "worker image imported", "image", name, "sha256", sum)
	return nil
}

// announcedImage asks the master (HEAD) for the worker image's name and
// SHA-256; both empty when it serves none.
func (o *Options) announcedImage(ctx context.Context) (name, sum string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, o.Master+"/v1/nodes/worker-image", nil)
	if err != nil {
		return "", "", err
	}
	resp, err := o.HTTPClient.Do(req)
	if err != nil {
		return "", "", fmt.Errorf("worker-image: reach the master at %s: %w", o.Master, err)
	}
	resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		o.Logger.InfoContext(ctx, "the master serves no worker image; the container runtime pulls it")
		return "", "", nil
	case resp.StatusCode/100 != 2:
		return "", "", &MasterError{Step: "worker-image", Status: resp.StatusCode, Message: "HEAD /v1/nodes/worker-image"}
	}
	name, sum = resp.Header.Get("X-Image-Name"), strings.ToLower(resp.Header.Get("X-Checksum-Sha256"))
	if name == "" || len(sum) != sha256.Size*2 {
		return "", "", fmt.Errorf("worker-image: the master announced image %q with SHA-256 %q", name, sum)
	}
	return name, sum, nil
}

// downloadImage fetches the tarball into the state directory and checks
// it against the announced SHA-256; it returns the file's path.
func (o *Options) downloadImage(ctx context.Context, want string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.Master+"/v1/nodes/worker-image", nil)
	if err != nil {
		return "", err
	}
	// The tarball is large: no whole-request timeout, the context bounds it.
	client := *o.HTTPClient
	client.Timeout = 0
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("worker-image: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", &MasterError{Step: "worker-image", Status: resp.StatusCode, Message: "GET /v1/nodes/worker-image"}
	}
	f, err := os.CreateTemp(o.StateDir, ".worker-image-*.tar")
	if err != nil {
		return "", err
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(f, h), resp.Body)
	err = errors.Join(err, f.Close())
	if got := hex.EncodeToString(h.Sum(nil)); err == nil && got != want {
		err = fmt.Errorf("worker-image: the tarball's SHA-256 is %s, the master announced %s; not importing it", got, want)
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// CommandImageRuntime is an ImageRuntime run as shell commands (sh -c):
// CheckCommand with IMAGE_NAME set exits 0 when the runtime has the image;
// ImportCommand with IMAGE_TAR set imports the tarball. On a k3s node they are
// `k3s crictl inspecti "$IMAGE_NAME"` and `k3s ctr images import "$IMAGE_TAR"`.
type CommandImageRuntime struct {
	CheckCommand  string
	ImportCommand string
}

// Has implements ImageRuntime: any failure of CheckCommand means the image is not there.
func (c CommandImageRuntime) Has(ctx context.Context, name string) (bool, error) {
	cmd := exec.CommandContext(ctx, "sh", "-c", c.CheckCommand)
	cmd.Env = append(os.Environ(), "IMAGE_NAME="+name)
	return cmd.Run() == nil, ctx.Err()
}

// Import implements ImageRuntime.
func (c CommandImageRuntime) Import(ctx context.Context, tarball string) error {
	cmd := exec.CommandContext(ctx, "sh", "-c", c.ImportCommand)
	cmd.Env = append(os.Environ(), "IMAGE_TAR="+tarball)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w: %s", c.ImportCommand, err, strings.TrimSpace(string(out)))
	}
	return nil
}
