package kubeletnode

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"sigs.k8s.io/yaml"
)

// DropInSettings are the KubeletConfiguration fields a machine owner's
// drop-in may set: what the machine's own resources decide (eviction,
// reservations, pod density, CPU, memory and topology managers, logs,
// shutdown). The rest is the node's: who may call the kubelet and how
// (authentication, authorization, ports, certificates), where its pods
// and images come from (static pods, the runtime, image collection of
// the imported images), its cgroups and its DNS.
var DropInSettings = []string{
	"containerLogMaxFiles", "containerLogMaxSize", "containerLogMaxWorkers", "containerLogMonitorInterval",
	"cpuManagerPolicy", "cpuManagerPolicyOptions", "cpuManagerReconcilePeriod",
	"evictionHard", "evictionMaxPodGracePeriod", "evictionMinimumReclaim", "evictionPressureTransitionPeriod",
	"evictionSoft", "evictionSoftGracePeriod", "mergeDefaultEvictionSettings",
	"kubeReserved", "logging", "maxPods", "memoryManagerPolicy", "podPidsLimit", "podsPerCore",
	"reservedMemory", "reservedSystemCPUs", "shutdownGracePeriod", "shutdownGracePeriodCriticalPods", "systemReserved",
	"topologyManagerPolicy", "topologyManagerPolicyOptions", "topologyManagerScope",
}

// CheckDropIns checks the kubelet drop-ins of dir (its *.conf files, as
// the kubelet reads them): each is a KubeletConfiguration that sets only
// DropInSettings, and, for a root process, dir and each file are root's
// and writable by no one else.
func CheckDropIns(dir string) error {
	if err := checkOwnedByRoot(dir); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() || filepath.Ext(e.Name()) != ".conf" {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if err := checkOwnedByRoot(path); err != nil {
			return err
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		asJSON, err := yaml.YAMLToJSON(raw)
		if err != nil {
			return fmt.Errorf("kubeletnode: the kubelet drop-in %s: %w", path, err)
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(asJSON, &fields); err != nil {
			return fmt.Errorf("kubeletnode: the kubelet drop-in %s is not a KubeletConfiguration object: %w", path, err)
		}
		var kind string
		_ = json.Unmarshal(fields["kind"], &kind)
		if kind != "KubeletConfiguration" {
			return fmt.Errorf("kubeletnode: the kubelet drop-in %s: kind %q, want KubeletConfiguration", path, kind)
		}
		for name := range fields {
			if name != "apiVersion" && name != "kind" && !slices.Contains(DropInSettings, name) {
				return fmt.Errorf("kubeletnode: the kubelet drop-in %s sets %s, which is the node's to set; a drop-in may set only %s",
					path, name, strings.Join(DropInSettings, ", "))
			}
		}
	}
	return nil
}

// checkOwnedByRoot: when this process is root, path belongs to root and
// neither its group nor others may write it.
func checkOwnedByRoot(path string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if st.Uid != 0 || info.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("kubeletnode: the kubelet drop-in %s belongs to uid %d with mode %v: it must be root's and writable by root only", path, st.Uid, info.Mode().Perm())
	}
	return nil
}
