package operator

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation"

	"gridweave.dev/rayctl/operatorbuild"
)

// Operator rules: mistakes both the API server and KubeRay v1.6.0's own
// validation admit, and the operator then mishandles — no pods for a
// group, a group's pods counted twice, a RayService that never serves —
// with at most a line in its log. Each is an error when the operator is
// certain to mishandle the object, a warning when that depends on the
// cluster or the images. The rule table is in the package doc;
// TestOperatorMishandles holds each error rule to the real operator.

// operatorRules checks a cluster spec (at prefix) for them.
func operatorRules(prefix, cluster string, spec *rayv1.RayClusterSpec, fail, warn func(id, path, msg, fix string)) {
	seen := map[string]int{}
	for i, g := range spec.WorkerGroupSpecs {
		p := fmt.Sprintf("%sworkerGroupSpecs[%d].groupName", prefix, i)
		if problem := groupNameProblem(cluster, g.GroupName); problem != "" {
			fail("group-name-label", p, fmt.Sprintf(
				"%q %s: the operator names each worker pod after it (%s<random>) and labels it ray.io/group=%s, so the API server refuses every worker pod and the cluster runs with its head only",
				g.GroupName, problem, operatorbuild.PodName(cluster+"-"+g.GroupName, rayv1.WorkerNode, true), g.GroupName),
				"use letters, digits, '-' and '.' (at most 63), beginning and ending with a letter or digit")
		}
		if first, dup := seen[g.GroupName]; dup {
			fail("duplicate-group-name", p, fmt.Sprintf(
				"%q also names workerGroupSpecs[%d]: the operator finds a group's pods by the ray.io/group label, so both groups count the same pods — one group's replicas stand in for the other's, and the cluster gets fewer workers than the groups ask for",
				g.GroupName, first), "give each worker group its own name")
		} else {
			seen[g.GroupName] = i
		}
	}
	params := []struct {
		path   string
		values map[string]string
	}{{prefix + "headGroupSpec.rayStartParams", spec.HeadGroupSpec.RayStartParams}}
	for i, g := range spec.WorkerGroupSpecs {
		params = append(params, struct {
			path   string
			values map[string]string
		}{fmt.Sprintf("%sworkerGroupSpecs[%d].rayStartParams", prefix, i), g.RayStartParams})
	}
	for _, p := range params {
		for _, key := range slices.Sorted(maps.Keys(p.values)) {
			if problem := rayStartParamProblem(key, p.values[key]); problem != "" {
				fail("ray-start-param", p.path+"."+key, problem+": the operator passes it to `ray start` as it is, ray start exits with a usage error, and the group's pods restart without end", "")
			}
		}
	}
	type podGroup struct {
		path       string
		containers []corev1.Container
	}
	groups := []podGroup{{prefix + "headGroupSpec", spec.HeadGroupSpec.Template.Spec.Containers}}
	for i := range spec.WorkerGroupSpecs {
		groups = append(groups, podGroup{fmt.Sprintf("%sworkerGroupSpecs[%d]", prefix, i), spec.WorkerGroupSpecs[i].Template.Spec.Containers})
	}
	for _, g := range groups {
		if len(g.containers) < 2 || rayImage(g.containers[0].Image) {
			continue
		}
		for _, c := range g.containers[1:] {
			if rayImage(c.Image) {
				warn("ray-container-first", g.path+".template.spec.containers[0]", fmt.Sprintf(
					"the operator runs `ray start` in the first container (%s, image %s), not in %s (image %s), which looks like the Ray one: the Ray node would start in the wrong image",
					g.containers[0].Name, g.containers[0].Image, c.Name, c.Image), "put the Ray container first; sidecars after it")
				break
			}
		}
	}
}

// integerStartParams are `ray start` options of type int (click): a
// value that is not a whole number is a usage error.
var integerStartParams = map[string]bool{
	"num-cpus": true, "num-gpus": true, "memory": true, "object-store-memory": true,
	"port": true, "dashboard-port": true, "metrics-export-port": true, "node-manager-port": true,
	"object-manager-port": true, "min-worker-port": true, "max-worker-port": true, "ray-client-server-port": true,
}

// rayStartParamProblem says why `ray start` refuses a rayStartParams
// value, or "". The operator writes the value into a shell command
// (common/pod.go convertParamMap: --key=value), so the shell's quoting
// applies first: resources must reach ray start as JSON, so its quotes
// must be quoted ('"{\"TPU\": 4}"' in YAML, as KubeRay's samples do).
func rayStartParamProblem(key, value string) string {
	if !integerStartParams[key] && key != "resources" {
		return ""
	}
	if v := strings.ToLower(value); v == "true" || v == "false" {
		return "" // the operator turns these into a switch, or drops the option
	}
	if strings.ContainsAny(value, "$`") {
		return "" // expanded by the shell: known only in the pod
	}
	word, ok := shellWord(value)
	if !ok {
		return fmt.Sprintf("%q is split into several words by the shell the operator runs ray start in", value)
	}
	if integerStartParams[key] {
		if _, err := strconv.ParseInt(word, 10, 64); err != nil {
			return fmt.Sprintf("%q is not a whole number, and ray start's --%s takes only one", value, key)
		}
		return ""
	}
	custom := map[string]float64{}
	if err := json.Unmarshal([]byte(word), &custom); err != nil {
		return fmt.Sprintf("%q reaches ray start as %s, not a JSON object of numbers (--resources reads one; quote the JSON for the shell)", value, word)
	}
	return ""
}

// shellWord is what a POSIX shell makes of s as one word (quotes removed,
// escapes applied); ok is false when s would be several words or has an
// unclosed quote.
func shellWord(s string) (word string, ok bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && i+1 < len(s):
			i++
			b.WriteByte(s[i])
		case c == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return "", false
			}
			b.WriteString(s[i+1 : i+1+end])
			i += end + 1
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte(`"\\$`+"`", s[i+1]) >= 0 {
					i++
				}
				b.WriteByte(s[i])
			}
			if i >= len(s) {
				return "", false
			}
		case c == ' ' || c == '\t' || c == '\n':
			return "", false
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), true
}

// groupNameProblem says why a worker group's name cannot be its pods'
// ray.io/group label value or part of their names, or "". The operator
// names them utils.PodName(cluster-group, worker): the pair cut to 50
// characters and lowercased, then "-worker-" and five random ones, which
// must make a DNS-1123 subdomain.
func groupNameProblem(cluster, group string) string {
	if errs := validation.IsValidLabelValue(group); len(errs) > 0 {
		return "is not a valid label value"
	}
	if cluster == "" {
		cluster = "cluster" // a generateName object: its name is not known yet
	}
	generateName := operatorbuild.PodName(cluster+"-"+group, rayv1.WorkerNode, true)
	if errs := apivalidation.NameIsDNSSubdomain(generateName, true); len(errs) > 0 {
		return "cannot be part of a pod name (letters, digits, '-' and '.' only)"
	}
	return ""
}

// rayImage reports whether an image looks like one of Ray's (rayproject/ray,
// anyscale/ray, rayproject/ray-ml, ...): its repository's last part starts
// with "ray".
func rayImage(image string) bool {
	repo, _, _ := strings.Cut(image, "@")
	if i := strings.LastIndexByte(repo, ':'); i > strings.LastIndexByte(repo, '/') {
		repo = repo[:i]
	}
	last := repo[strings.LastIndexByte(repo, '/')+1:]
	return last == "ray" || strings.HasPrefix(last, "ray-")
}
