package raytest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
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
