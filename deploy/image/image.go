package image

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Paths and identity inside the image.
const (
	Entrypoint = "/gridweave-server"
	CACerts    = "/etc/ssl/certs/ca-certificates.crt"
	// User is the non-root user the image runs as (the Kubernetes
	// manifest runs it as root with only NET_ADMIN, for WireGuard).
	User    = "65532:65532"
	DataDir = "/data"
)

// DebianCACerts is where Debian's ca-certificates package puts the bundle.
const DebianCACerts = "/etc/ssl/certs/ca-certificates.crt"

// Options say what goes into the image.
type Options struct {
	// Binary is the static server binary.
	Binary string
	// CACerts is the CA bundle; default DebianCACerts.
	CACerts string
	// Version labels the image (org.opencontainers.image.version).
	Version string
	// Revision labels the image with the source's commit, if known.
	Revision string
}

// epoch is every timestamp in the image: the same inputs, the same digest.
var epoch = time.Unix(0, 0).UTC()

// Build assembles the image.
func Build(o Options) (v1.Image, error) {
	if o.CACerts == "" {
		o.CACerts = DebianCACerts
	}
	binary, err := os.ReadFile(o.Binary)
	if err != nil {
		return nil, fmt.Errorf("image: the server binary: %w", err)
	}
	certs, err := os.ReadFile(o.CACerts)
	if err != nil {
		return nil, fmt.Errorf("image: the CA certificates (Debian's ca-certificates package): %w", err)
	}
	layerTar, err := rootFS(binary, certs)
	if err != nil {
		return nil, err
	}
	img, cfg, err := oneLayer(layerTar, "gridweave deploy/image: the static server, CA certificates, a non-root user")
	if err != nil {
		return nil, err
	}
	cfg.Config.Entrypoint = []string{Entrypoint}
	cfg.Config.Cmd = nil
	cfg.Config.User = User
	cfg.Config.Env = []string{"SSL_CERT_FILE=" + CACerts, "KUBERAY_DB=" + DataDir + "/kuberay.db"}
	cfg.Config.ExposedPorts = map[string]struct{}{"8800/tcp": {}, "8801/tcp": {}}
	cfg.Config.Volumes = map[string]struct{}{DataDir: {}}
	cfg.Config.Labels = map[string]string{
		"org.opencontainers.image.title":       "gridweave-server",
		"org.opencontainers.image.description": "The Gridweave control-plane server: join flow, WireGuard mesh, RayClusters",
		"org.opencontainers.image.version":     o.Version,
		"org.opencontainers.image.licenses":    "Apache-2.0",
		"org.opencontainers.image.source":      "https://gridweave.dev",
		"org.opencontainers.image.base.name":   "scratch",
	}
	if o.Revision != "" {
		cfg.Config.Labels["org.opencontainers.image.revision"] = o.Revision
	}
	return mutate.ConfigFile(img, cfg)
}

// oneLayer is an image of the one layer layerTar, with no base, and a copy
// of its configuration to complete (see FromLayer).
func oneLayer(layerTar []byte, createdBy string) (v1.Image, *v1.ConfigFile, error) {
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layerTar)), nil }, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, nil, err
	}
	return FromLayer(layer, createdBy)
}

// FromLayer is an image of the one layer, with no base, and a copy of its
// configuration to complete: every timestamp the epoch, the platform this
// machine's (the binaries in it are built for it; containerd refuses to
// import an image whose configuration names none), the working directory
// /. The manifest names the layer by its own media type (its
// compression). Its caller sets the rest and puts the configuration in
// with mutate.ConfigFile.
func FromLayer(layer v1.Layer, createdBy string) (v1.Image, *v1.ConfigFile, error) {
	mediaType, err := layer.MediaType()
	if err != nil {
		return nil, nil, err
	}
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), mutate.Addendum{
		Layer: layer, History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: createdBy, Comment: "no base image"}, MediaType: mediaType,
	})
	if err != nil {
		return nil, nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture, cfg.OS = runtime.GOARCH, "linux"
	cfg.Created = v1.Time{Time: epoch}
	cfg.Config.WorkingDir = "/"
	return img, cfg, nil
}

// rootFS is the image's one layer.
func rootFS(binary, certs []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dir := func(path string, mode int64, uid int) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: path + "/", Mode: mode, Uid: uid, Gid: uid, ModTime: epoch, Format: tar.FormatPAX})
	}
	file := func(path string, mode int64, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: path, Mode: mode, Size: int64(len(data)), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	steps := []func() error{
		func() error { return dir("etc", 0o755, 0) },
		func() error {
			return file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/sbin/nologin\ngridweave:x:65532:65532:gridweave:/data:/sbin/nologin\n"))
		},
		func() error { return file("etc/group", 0o644, []byte("root:x:0:\ngridweave:x:65532:\n")) },
		func() error { return dir("etc/ssl", 0o755, 0) },
		func() error { return dir("etc/ssl/certs", 0o755, 0) },
		func() error { return file(CACerts[1:], 0o644, certs) },
		func() error { return dir("data", 0o700, 65532) },
		func() error { return dir("tmp", 0o1777, 0) },
		func() error { return file(Entrypoint[1:], 0o755, binary) },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteTarball writes the image as a tarball `docker load` and `k3s ctr
// images import` read, tagged ref (e.g. gridweave/server:0.1.0).
func WriteTarball(img v1.Image, ref, path string) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("image: tag %q: %w", ref, err)
	}
	return tarball.WriteToFile(path, tag, img)
}

// WriteLayout writes the image into an OCI image layout directory.
func WriteLayout(img v1.Image, dir string) error {
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendImage(img)
}
