package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// SubmitRequest is POST /api/jobs/.
type SubmitRequest struct {
	Entrypoint          string             `json:"entrypoint"`
	SubmissionID        string             `json:"submission_id,omitempty"`
	RuntimeEnv          map[string]any     `json:"runtime_env,omitempty"`
	Metadata            map[string]string  `json:"metadata,omitempty"`
	EntrypointNumCPUs   float64            `json:"entrypoint_num_cpus,omitempty"`
	EntrypointNumGPUs   float64            `json:"entrypoint_num_gpus,omitempty"`
	EntrypointMemory    int64              `json:"entrypoint_memory,omitempty"`
	EntrypointResources map[string]float64 `json:"entrypoint_resources,omitempty"`
}

// SubmitResponse names the submitted job.
type SubmitResponse struct {
	JobID        string `json:"job_id"`
	SubmissionID string `json:"submission_id"`
}

// JobDetails is a job as the Jobs API describes it.
type JobDetails struct {
	Type         string            `json:"type"` // SUBMISSION or DRIVER
	Entrypoint   string            `json:"entrypoint"`
	JobID        *string           `json:"job_id"`
	SubmissionID *string           `json:"submission_id"`
	Status       string            `json:"status"` // PENDING, RUNNING, STOPPED, SUCCEEDED, FAILED
	Message      *string           `json:"message"`
	ErrorType    *string           `json:"error_type"`
	StartTime    *int64            `json:"start_time"` // ms since the epoch
	EndTime      *int64            `json:"end_time"`
	Metadata     map[string]string `json:"metadata"`
	RuntimeEnv   map[string]any    `json:"runtime_env"`
	DriverInfo   *struct {
		ID            string `json:"id"`
		NodeIPAddress string `json:"node_ip_address"`
		PID           string `json:"pid"`
	} `json:"driver_info"`
}

// Terminal reports whether the job has finished one way or another.
func (j JobDetails) Terminal() bool {
	return j.Status == "STOPPED" || j.Status == "SUCCEEDED" || j.Status == "FAILED"
}

// SubmitJob submits a job. A reused submission_id is an error wrapping
// ErrSubmissionIDExists. An empty entrypoint is refused here: Ray accepts
// it and runs an empty command.
func (c *Client) SubmitJob(ctx context.Context, req SubmitRequest) (SubmitResponse, error) {
	var out SubmitResponse
	if strings.TrimSpace(req.Entrypoint) == "" {
		return out, fmt.Errorf("dashboard: submit job: %w: entrypoint is required", ErrInvalidRequest)
	}
	err := c.do(ctx, http.MethodPost, "/api/jobs/", nil, req, &out)
	return out, err
}

// GetJob returns a job by submission id (or job id); ErrNotFound if unknown.
func (c *Client) GetJob(ctx context.Context, id string) (JobDetails, error) {
	var out JobDetails
	err := c.do(ctx, http.MethodGet, "/api/jobs/"+url.PathEscape(id), nil, nil, &out)
	return out, err
}

// ListJobs returns every job.
func (c *Client) ListJobs(ctx context.Context) ([]JobDetails, error) {
	var out []JobDetails
	err := c.do(ctx, http.MethodGet, "/api/jobs/", nil, nil, &out)
	return out, err
}

// JobLogs returns a job's whole log.
func (c *Client) JobLogs(ctx context.Context, id string) (string, error) {
	var out struct {
		Logs string `json:"logs"`
	}
	err := c.do(ctx, http.MethodGet, "/api/jobs/"+url.PathEscape(id)+"/logs", nil, nil, &out)
	return out.Logs, err
}

// StopJob asks a job to stop; it reports whether a stop was sent (false
// for a job that had already finished).
func (c *Client) StopJob(ctx context.Context, id string) (bool, error) {
	var out struct {
		Stopped bool `json:"stopped"`
	}
	err := c.do(ctx, http.MethodPost, "/api/jobs/"+url.PathEscape(id)+"/stop", nil, nil, &out)
	return out.Stopped, err
}

// DeleteJob deletes a finished job's record and logs (Ray answers
// {"deleted": true}). Ray refuses a job that has not finished (an
// *APIError with status 500: Ray 2.54 raises it as an internal error).
func (c *Client) DeleteJob(ctx context.Context, id string) (bool, error) {
	var out struct {
		Deleted bool `json:"deleted"`
	}
	err := c.do(ctx, http.MethodDelete, "/api/jobs/"+url.PathEscape(id), nil, nil, &out)
	return out.Deleted, err
}
