package raytest

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
)

// ServeModule is a Serve application small enough for a test's CPUs:
// import path model:app in a package holding it as model.py.
const ServeModule = `from ray import serve

@serve.deployment(num_replicas=1, ray_actor_options={"num_cpus": 0.1})
class Model:
    def __call__(self, request):
        return "ok"

app = Model.bind()
`

// Package zips files as a runtime-env package (files at the top, as Ray
// holds uploaded packages) and names it by its content, as Ray names
// working_dir packages: gcs://_ray_pkg_<hash>.zip.
func Package(files map[string]string) (uri string, data []byte, err error) {
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		f, err := w.Create(name)
		if err != nil {
			return "", nil, err
		}
		if _, err := f.Write([]byte(files[name])); err != nil {
			return "", nil, err
		}
	}
	if err := w.Close(); err != nil {
		return "", nil, err
	}
	sum := sha256.Sum256(buf.Bytes())
	return "gcs://_ray_pkg_" + hex.EncodeToString(sum[:8]) + ".zip", buf.Bytes(), nil
}
