package operatorbuild

import (
	"encoding/json"
	"fmt"

	"github.com/Masterminds/semver/v3"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
)

// metadataSince is the Ray versions --metadata-json is given for. As a
// constraint (not a comparison) it leaves pre-releases out, as the
// operator's does.
var metadataSince, _ = semver.NewConstraint(">= 2.6.0")

// MetadataJSON is a RayJob's metadata as the operator passes it to `ray
// job submit --metadata-json` (common/job.go GetMetadataJson): only for
// a rayVersion, read as a semantic version, of 2.6.0 or later.
func MetadataJSON(metadata map[string]string, rayVersion string) (string, error) {
	v, err := semver.NewVersion(rayVersion)
	if err != nil {
		return "", fmt.Errorf("failed to parse Ray version: %v: %w", rayVersion, err)
	}
	if !metadataSince.Check(v) {
		return "", fmt.Errorf("the Ray version must be at least 2.6.0 to use the metadata field")
	}
	b, err := json.Marshal(metadata)
	if err != nil {
		return "", fmt.Errorf("failed to marshal metadata: %v: %w", metadata, err)
	}
	return string(b), nil
}

// SubmitterTemplate is the template of a RayJob's submitter pod
// (common/job.go GetSubmitterTemplate): the job's submitterPodTemplate,
// or the operator's: one container of the head's image, never
// restarted.
func SubmitterTemplate(job *rayv1.RayJobSpec, cluster *rayv1.RayClusterSpec) corev1.PodTemplateSpec {
	if job.SubmitterPodTemplate != nil {
		return *job.SubmitterPodTemplate.DeepCopy()
	}
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{
			Name:      SubmitterContainerName,
			Image:     cluster.HeadGroupSpec.Template.Spec.Containers[0].Image,
			Resources: fixedResources("1", "1Gi", "500m", "200Mi"),
		}},
		RestartPolicy: corev1.RestartPolicyNever,
	}}
}
