package raytest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"time"
)

// HostsScript runs one task pinned to each alive Ray node and prints
// "RAN ON " and the host names they ran on, sorted and comma-separated
// (a pod's host name is its name).
const HostsScript = `
import ray, socket
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
ray.init()
@ray.remote(num_cpus=0)
def where():
    return socket.gethostname()
nodes = [n["NodeID"] for n in ray.nodes() if n["Alive"]]
names = ray.get([where.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n, soft=False)).remote() for n in nodes])
print("RAN ON " + ",".join(sorted(names)))
`

// DistributedTrainScript is a user's training script that sets up
// torch.distributed itself, as torchrun scripts do: two ranks (gloo) sum
// their rank plus one, and each prints "rank zero of 2 on ADDR: sum 3"
// (rank one likewise). Words, not digits, tell the ranks apart: Ray folds
// log lines that differ only in numbers into one.
const DistributedTrainScript = `import os, torch, torch.distributed as dist
dist.init_process_group(backend="gloo")
t = torch.tensor([dist.get_rank() + 1.0])
dist.all_reduce(t)
print(f"rank {['zero', 'one'][dist.get_rank()]} of {dist.get_world_size()} on {os.environ['MASTER_ADDR']}: sum {t.item():.0f}", flush=True)
dist.destroy_process_group()
`

// A TrainRank is what a log of DistributedTrainScript says of a rank
// that printed the right sum: where the ranks met (MASTER_ADDR) and, from
// the prefix Ray gives a worker's line, the address of the Ray node the
// rank ran on ("" when the line has none).
type TrainRank struct{ MetAt, RanOn string }

// DistributedTrainRanks reads a log of DistributedTrainScript: each rank
// ("zero", "one") that printed the right sum.
func DistributedTrainRanks(logs string) map[string]TrainRank {
	ranks := map[string]TrainRank{}
	for _, m := range rankSum.FindAllStringSubmatch(logs, -1) {
		ranks[m[2]] = TrainRank{MetAt: m[3], RanOn: m[1]}
	}
	return ranks
}

var rankSum = regexp.MustCompile(`(?:ip=([^,)\s]+)\)[^\n]*?)?rank (zero|one) of 2 on (\S+): sum 3\b`)

// JSONCall calls Ray's dashboard: a POST of body as JSON when body is not
// nil, else a GET; the answer is decoded into out.
type JSONCall func(url string, body, out any) error

// RunJob submits script (Python) as a Ray job through the dashboard at
// dashboard (http://host:port), waits up to limit for it to end, and
// returns its log; a job that does not succeed is an error with its
// status and log.
func RunJob(call JSONCall, dashboard, script string, limit time.Duration) (string, error) {
	entrypoint := fmt.Sprintf(`python -c 'import base64; exec(base64.b64decode("%s"))'`, base64.StdEncoding.EncodeToString([]byte(script)))
	var submitted struct {
		SubmissionID string `json:"submission_id"`
	}
	if err := call(dashboard+"/api/jobs/", map[string]any{"entrypoint": entrypoint}, &submitted); err != nil {
		return "", fmt.Errorf("raytest: submit a job: %w", err)
	}
	if submitted.SubmissionID == "" {
		return "", fmt.Errorf("raytest: submit a job: no submission_id in the answer")
	}
	var job struct {
		Status  string `json:"status"`
		Message string `json:"message"`
	}
	for deadline := time.Now().Add(limit); ; time.Sleep(500 * time.Millisecond) {
		if err := call(dashboard+"/api/jobs/"+submitted.SubmissionID, nil, &job); err != nil {
			return "", fmt.Errorf("raytest: job %s: %w", submitted.SubmissionID, err)
		}
		if job.Status == "SUCCEEDED" || job.Status == "FAILED" || job.Status == "STOPPED" {
			break
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("raytest: job %s still %s after %s", submitted.SubmissionID, job.Status, limit)
		}
	}
	var logs struct {
		Logs string `json:"logs"`
	}
	if err := call(dashboard+"/api/jobs/"+submitted.SubmissionID+"/logs", nil, &logs); err != nil {
		return "", fmt.Errorf("raytest: job %s's log: %w", submitted.SubmissionID, err)
	}
	if job.Status != "SUCCEEDED" {
		return logs.Logs, fmt.Errorf("raytest: job %s %s: %s\n%s", submitted.SubmissionID, job.Status, job.Message, logs.Logs)
	}
	return logs.Logs, nil
}

// HTTPJSON is a JSONCall over HTTP from this process.
func HTTPJSON(url string, body, out any) error {
	method, r := http.MethodGet, io.Reader(nil)
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return err
		}
		method, r = http.MethodPost, bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, raw)
	}
	return json.Unmarshal(raw, out)
}
