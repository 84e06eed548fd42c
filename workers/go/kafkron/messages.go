package kafkron

// The records of the topics contract a worker reads and writes (docs/DESIGN.md §2.3,
// §2.4, §6.6; docs/WORKER-PROTOCOL.md §1, §6, §9). Instants are RFC 3339 UTC with
// milliseconds; inside the code they are epoch milliseconds.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Result statuses a worker writes (topics/vocabulary.py: RunStatus).
const (
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
	StatusTimedOut  = "timed_out"
	StatusCancelled = "cancelled"
	StatusRunning   = "running" // a progress report, never an outcome
)

// CancelType is the "type" of a cancel record on {ns}.runs.
const CancelType = "run.cancel"

// Error types with a meaning to the shard or to readers.
const (
	NonRetryableType = "NonRetryable"
	CancelledType    = "Cancelled"
	RunCancelledType = "RunCancelled"
	TimeoutType      = "Timeout"
	UnknownJobType   = "UnknownJob"
	// A run with a concurrency key reached this worker, which does not keep the key's
	// limit: it fails without running (the scheduler retries or dead-letters it).
	ConcurrencyUnsupportedType = "ConcurrencyUnsupported"
	// A run with a rate limit reached this worker, which does not keep the key's bucket
	// nor its pauses: it fails without running, as a keyed run does.
	RateLimitUnsupportedType = "RateLimitUnsupported"
	MaxErrorChars            = 2000
	ProgressIntervalMs       = 10_000
	ProgressMaxBytes         = 4096
	RetryAfterField          = "retry_after_s"
)

const instantLayout = "2006-01-02T15:04:05.000Z"

// FormatMs is topics/timefmt.py: format_ms.
func FormatMs(ms int64) string {
	return time.UnixMilli(ms).UTC().Format(instantLayout)
}

// ParseInstant reads an RFC 3339 instant into epoch milliseconds.
func ParseInstant(text string) (int64, error) {
	t, err := time.Parse(time.RFC3339Nano, text)
	if err != nil {
		return 0, fmt.Errorf("%q is not an RFC 3339 instant", text)
	}
	return t.UnixMilli(), nil
}

// Job names a registered function and its arguments.
type Job struct {
	Name string         `json:"name"`
	Args map[string]any `json:"args"`
	// Keyed: the job names a concurrency key (job.concurrency). This worker does not
	// keep concurrency keys, so it never runs such a run (core.go, deliver).
	Keyed bool `json:"-"`
	// RateLimited: the job names a rate limit (job.rate_limit). This worker does not
	// keep rate limits, so it never runs such a run (core.go, deliver).
	RateLimited bool `json:"-"`
}

// Run is one attempt of one occurrence, as a worker receives it.
type Run struct {
	RunID          string
	ScheduleID     string
	Task           *string
	ScheduledMs    int64
	FiredMs        int64
	Attempt        int
	Job            Job
	IdempotencyKey string
	DeadlineMs     int64
	LogicalDateMs  *int64
	Interval       *[2]int64
	// ReportStart: its schedule (or DAG) has a start deadline; the worker reports the
	// attempt's start at once (docs/WORKER-PROTOCOL.md §8.3).
	ReportStart bool
}

// Cancel is a request to stop one attempt (docs/DESIGN.md §6.6).
type Cancel struct {
	RunID       string
	ScheduleID  string
	Task        *string
	Attempt     int
	Reason      string
	RequestedMs int64
}

type fields map[string]json.RawMessage

func decodeObject(value []byte, what string) (fields, error) {
	var f fields
	if err := json.Unmarshal(value, &f); err != nil || f == nil {
		return nil, fmt.Errorf("%s: expected a JSON object", what)
	}
	var v int
	if raw, ok := f["v"]; !ok || json.Unmarshal(raw, &v) != nil || v != 1 || !isInteger(raw) {
		return nil, fmt.Errorf("%s.v: expected 1", what)
	}
	return f, nil
}

func isInteger(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && !bytes.ContainsAny(t, ".eE") && (t[0] == '-' || (t[0] >= '0' && t[0] <= '9'))
}

func (f fields) present(name string) bool {
	raw, ok := f[name]
	return ok && !bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

func (f fields) str(what, name string) (string, error) {
	var s string
	raw, ok := f[name]
	if !ok {
		return "", fmt.Errorf("%s.%s: missing", what, name)
	}
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", fmt.Errorf("%s.%s: expected a string", what, name)
	}
	return s, nil
}

func (f fields) optStr(what, name string) (*string, error) {
	if !f.present(name) {
		return nil, nil
	}
	s, err := f.str(what, name)
	return &s, err
}

func (f fields) integer(what, name string) (int, error) {
	raw, ok := f[name]
	var n int
	if !ok || !isInteger(raw) || json.Unmarshal(raw, &n) != nil {
		return 0, fmt.Errorf("%s.%s: expected an integer", what, name)
	}
	return n, nil
}

func (f fields) instant(what, name string) (int64, error) {
	s, err := f.str(what, name)
	if err != nil {
		return 0, err
	}
	ms, err := ParseInstant(s)
	if err != nil {
		return 0, fmt.Errorf("%s.%s: %v", what, name, err)
	}
	return ms, nil
}

// IsCancel says whether a {ns}.runs value is a cancel record (a run has no "type").
func IsCancel(value []byte) bool {
	if !bytes.Contains(value, []byte(`"type"`)) {
		return false
	}
	var probe struct {
		Type *string `json:"type"`
	}
	if json.Unmarshal(value, &probe) != nil || probe.Type == nil {
		return false
	}
	return *probe.Type == CancelType
}

// ParseRun is topics/messages.py: parse_run.
func ParseRun(value []byte) (*Run, error) {
	f, err := decodeObject(value, "run")
	if err != nil {
		return nil, err
	}
	r := &Run{}
	if r.RunID, err = f.str("run", "run_id"); err != nil {
		return nil, err
	}
	if r.ScheduleID, err = f.str("run", "schedule_id"); err != nil {
		return nil, err
	}
	if r.Task, err = f.optStr("run", "task"); err != nil {
		return nil, err
	}
	if r.ScheduledMs, err = f.instant("run", "scheduled_at"); err != nil {
		return nil, err
	}
	if r.FiredMs, err = f.instant("run", "fired_at"); err != nil {
		return nil, err
	}
	if r.Attempt, err = f.integer("run", "attempt"); err != nil {
		return nil, err
	}
	if r.IdempotencyKey, err = f.str("run", "idempotency_key"); err != nil {
		return nil, err
	}
	if r.DeadlineMs, err = f.instant("run", "deadline"); err != nil {
		return nil, err
	}
	rawJob, ok := f["job"]
	if !ok {
		return nil, errors.New("run.job: missing")
	}
	jf := fields{}
	if json.Unmarshal(rawJob, &jf) != nil || jf == nil {
		return nil, errors.New("run.job: expected an object")
	}
	if r.Job.Name, err = jf.str("run.job", "name"); err != nil {
		return nil, err
	}
	r.Job.Keyed = jf.present("concurrency")
	r.Job.RateLimited = jf.present("rate_limit")
	r.Job.Args = map[string]any{}
	if jf.present("args") {
		if json.Unmarshal(jf["args"], &r.Job.Args) != nil || r.Job.Args == nil {
			return nil, errors.New("run.job.args: expected an object")
		}
	}
	if f.present("logical_date") {
		ms, err := f.instant("run", "logical_date")
		if err != nil {
			return nil, err
		}
		r.LogicalDateMs = &ms
	}
	if f.present("data_interval") {
		inner := fields{}
		if json.Unmarshal(f["data_interval"], &inner) != nil || inner == nil {
			return nil, errors.New("run.data_interval: expected an object")
		}
		start, err := inner.instant("run.data_interval", "start")
		if err != nil {
			return nil, err
		}
		end, err := inner.instant("run.data_interval", "end")
		if err != nil {
			return nil, err
		}
		r.Interval = &[2]int64{start, end}
	}
	// As topics/messages.py: only a JSON true asks for it.
	r.ReportStart = f.present("report_start") && string(f["report_start"]) == "true"
	return r, nil
}

// ParseCancel is topics/messages.py: parse_cancel.
func ParseCancel(value []byte) (*Cancel, error) {
	f, err := decodeObject(value, "cancel")
	if err != nil {
		return nil, err
	}
	if t, err := f.str("cancel", "type"); err != nil || t != CancelType {
		return nil, fmt.Errorf("cancel.type: expected %q", CancelType)
	}
	c := &Cancel{}
	if c.RunID, err = f.str("cancel", "run_id"); err != nil {
		return nil, err
	}
	if c.ScheduleID, err = f.str("cancel", "schedule_id"); err != nil {
		return nil, err
	}
	if c.Task, err = f.optStr("cancel", "task"); err != nil {
		return nil, err
	}
	if c.Attempt, err = f.integer("cancel", "attempt"); err != nil {
		return nil, err
	}
	if c.Reason, err = f.str("cancel", "reason"); err != nil {
		return nil, err
	}
	if c.RequestedMs, err = f.instant("cancel", "requested_at"); err != nil {
		return nil, err
	}
	return c, nil
}

// ErrorInfo is a result's "error": {"type", "message", "retry_after_s"?}.
type ErrorInfo struct {
	Type        string `json:"type"`
	Message     string `json:"message"`
	RetryAfterS string `json:"retry_after_s,omitempty"`
}

// Progress is a progress report's details and instant.
type Progress struct {
	Details any
	AtMs    int64
}

type progressJSON struct {
	Details json.RawMessage `json:"details"`
	At      string          `json:"at"`
}

type resultJSON struct {
	V           int            `json:"v"`
	RunID       string         `json:"run_id"`
	ScheduleID  string         `json:"schedule_id"`
	Attempt     int            `json:"attempt"`
	Status      string         `json:"status"`
	ScheduledAt string         `json:"scheduled_at"`
	StartedAt   *string        `json:"started_at"`
	FinishedAt  *string        `json:"finished_at"`
	Worker      string         `json:"worker"`
	Task        *string        `json:"task,omitempty"`
	Error       *ErrorInfo     `json:"error,omitempty"`
	Progress    *progressJSON  `json:"progress,omitempty"`
	Target      map[string]any `json:"target,omitempty"`
}

func optInstant(ms *int64) *string {
	if ms == nil {
		return nil
	}
	s := FormatMs(*ms)
	return &s
}

// ResultValue is topics/messages.py: result_value for the statuses a worker writes
// (docs/WORKER-PROTOCOL.md §6).
func ResultValue(run *Run, status string, startedMs, finishedMs *int64, worker string,
	errInfo *ErrorInfo, progress *Progress, target map[string]any) []byte {
	r := resultJSON{
		V: 1, RunID: run.RunID, ScheduleID: run.ScheduleID, Attempt: run.Attempt,
		Status: status, ScheduledAt: FormatMs(run.ScheduledMs),
		StartedAt: optInstant(startedMs), FinishedAt: optInstant(finishedMs),
		Worker: worker, Task: run.Task, Target: target,
	}
	if errInfo != nil && status != StatusSucceeded && status != StatusRunning {
		e := *errInfo
		e.Message = clipMessage(e.Message)
		r.Error = &e
	}
	if progress != nil {
		r.Progress = &progressJSON{Details: BoundedDetails(progress.Details), At: FormatMs(progress.AtMs)}
	}
	return marshal(r)
}

// BoundedDetails is topics/messages.py: bounded_details.
func BoundedDetails(details any) json.RawMessage {
	encoded, err := json.Marshal(details)
	if err != nil {
		encoded = marshal(fmt.Sprintf("%v", details))
	}
	if len(encoded) > ProgressMaxBytes {
		note := fmt.Sprintf("details of %d bytes (at most %d)", len(encoded), ProgressMaxBytes)
		return marshal(map[string]string{"omitted": note})
	}
	return encoded
}

func clipMessage(message string) string {
	runes := []rune(message)
	if len(runes) > MaxErrorChars {
		return string(runes[:MaxErrorChars-1]) + "…"
	}
	return message
}

func marshal(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err) // only values built here are encoded
	}
	return bytes.TrimRight(buf.Bytes(), "\n")
}
