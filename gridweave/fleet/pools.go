package fleet

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"gridweave.dev/joinkeys"
)

// PoolLabel is the pod label that marks a worker group as one the fleet
// manages, its value the pool.
const PoolLabel = "gridweave.dev/worker-pool"

// NodePoolLabel is the Kubernetes Node label that puts a GPU node into its
// worker pool: the pool's worker group selects it. It is under
// node-restriction.kubernetes.io/, which the NodeRestriction admission
// plugin forbids a kubelet to set on its own Node, so only the master puts
// a machine into a pool (and the fleet removes it from Nodes that are not
// its own).
const NodePoolLabel = "node-restriction.kubernetes.io/gridweave-pool"

// VersionAnnotation is the Kubernetes Node annotation that carries the
// node's reported agent version.
const VersionAnnotation = "gridweave.dev/worker-version"

// Pool is one kind of GPU machine: the nodes with the same GPU vendor,
// model and count share a pool, and a pool is one Ray worker group.
type Pool struct {
	// Name is a DNS-1123 label of at most 40 characters,
	// gpu-<vendor>-<model>-x<count>, the model shortened with a hash when
	// too long: it goes into pod names and label values.
	Name   string
	Vendor string
	Model  string
	GPUs   int
	// Resource is the extended resource the GPUs are scheduled by
	// (nvidia.com/gpu, amd.com/gpu).
	Resource string
}

// PoolOf returns the pool of a node's GPUs; ok is false for a CPU-only
// node. A GPU without a vendor counts as NVIDIA's.
func PoolOf(gpus []joinkeys.GPU) (p Pool, ok bool) {
	if len(gpus) == 0 {
		return Pool{}, false
	}
	return poolFor(gpus[0].Vendor, gpus[0].Name, len(gpus)), true
}

// poolFor is the pool of machines with count GPUs of vendor's model.
func poolFor(vendor, model string, count int) (p Pool) {
	p = Pool{Vendor: vendor, Model: model, GPUs: count}
	if p.Vendor == "" {
		p.Vendor = joinkeys.VendorNVIDIA
	}
	p.Resource = "nvidia.com/gpu"
	if p.Vendor == joinkeys.VendorAMD {
		p.Resource = "amd.com/gpu"
	}
	p.Name = poolName(p.Vendor, p.Model, p.GPUs)
	return p
}

func poolName(vendor, model string, count int) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(model) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	slug := strings.TrimSuffix(b.String(), "-")
	if slug == "" {
		slug = "unknown"
	}
	prefix, suffix := "gpu-"+vendor+"-", fmt.Sprintf("-x%d", count)
	if room := 40 - len(prefix) - len(suffix); len(slug) > room {
		sum := sha256.Sum256([]byte(model))
		slug = strings.TrimSuffix(slug[:room-7], "-") + "-" + hex.EncodeToString(sum[:])[:6]
	}
	return prefix + slug + suffix
}
