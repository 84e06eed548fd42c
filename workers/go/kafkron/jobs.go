package kafkron

// The job API of the Go worker: a registry of func(ctx, run) error.
//
//	reg := kafkron.NewRegistry()
//	reg.Register("billing.invoice", func(ctx context.Context, run *kafkron.RunContext) error {
//		key := run.IdempotencyKeyFor("invoice", run.Args["region"])
//		return provider.Invoice(ctx, key)
//	})
//
// The context is cancelled when the worker wants the job to stop (its deadline, a
// cancel record, its partition lost); a job returns soon after. RunContext.Heartbeat
// reports progress and returns ErrCancelled once the job should stop.

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"
)

// JobFunc is a job: its error decides the attempt's outcome.
type JobFunc func(ctx context.Context, run *RunContext) error

// ErrCancelled is returned by Heartbeat once the worker wants the job to stop; a job
// returning it (or the context's error) ends the attempt "cancelled".
var ErrCancelled = errors.New("run cancelled")

// JobError is an error with the result's error type and message of one's choosing
// (Type "NonRetryable" makes the shard dead-letter the run without retrying).
type JobError struct {
	Type        string
	Message     string
	RetryAfterS string
}

func (e *JobError) Error() string { return e.Type + ": " + e.Message }

// NonRetryable makes an error the shard does not retry.
func NonRetryable(format string, args ...any) error {
	return &JobError{Type: NonRetryableType, Message: fmt.Sprintf(format, args...)}
}

// TargetOutcome lets a built-in job put a "target" into its result (an HTTP call's
// status, duration and body): return it, wrapping the attempt's error if any.
type TargetOutcome struct {
	Target map[string]any
	Err    error
}

func (t *TargetOutcome) Error() string {
	if t.Err == nil {
		return "target succeeded"
	}
	return t.Err.Error()
}

// Registry maps job names to functions.
type Registry struct {
	mu   sync.RWMutex
	jobs map[string]JobFunc
}

// NewRegistry makes an empty registry.
func NewRegistry() *Registry { return &Registry{jobs: map[string]JobFunc{}} }

// Register adds a job; a second registration of a name panics.
func (r *Registry) Register(name string, fn JobFunc) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.jobs[name]; ok {
		panic("job registered twice: " + name)
	}
	r.jobs[name] = fn
}

// Lookup finds a job.
func (r *Registry) Lookup(name string) (JobFunc, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	fn, ok := r.jobs[name]
	return fn, ok
}

// Names lists the registered jobs.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.jobs))
	for name := range r.jobs {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// RunContext is what a job knows about its run.
type RunContext struct {
	Run    *Run
	Args   map[string]any
	Worker string

	mu           sync.Mutex
	cancelReason string
	progressAt   int64
	onProgress   func(details any, atMs int64)
}

// IdempotencyKeyFor is topics/messages.py: idempotency_key(run_id, *parts): the same
// on every attempt and redelivery; pass it to every external effect.
func (c *RunContext) IdempotencyKeyFor(parts ...any) string {
	return IdempotencyKey(c.Run.RunID, parts...)
}

// IdempotencyKey: sha256 over the length-prefixed UTF-8 parts, 64 hex.
func IdempotencyKey(runID string, parts ...any) string {
	h := sha256.New()
	write := func(s string) {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	write(runID)
	for _, p := range parts {
		write(fmt.Sprint(p))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Heartbeat reports progress (details: any JSON value, nil for none), at most one
// report per 10 s per attempt; it returns ErrCancelled once the job should stop.
func (c *RunContext) Heartbeat(details any) error {
	now := time.Now().UnixMilli()
	c.mu.Lock()
	send := details != nil && c.onProgress != nil && (c.progressAt == 0 || now-c.progressAt >= ProgressIntervalMs)
	if send {
		c.progressAt = now
	}
	reason := c.cancelReason
	c.mu.Unlock()
	if send {
		c.onProgress(details, now)
	}
	if reason != "" {
		return fmt.Errorf("%w: %s", ErrCancelled, reason)
	}
	return nil
}

func (c *RunContext) requestCancel(reason string) {
	c.mu.Lock()
	if c.cancelReason == "" {
		if reason == "" {
			reason = "cancelled"
		}
		c.cancelReason = reason
	}
	c.mu.Unlock()
}

// CancelReason is why the worker asked the job to stop ("" if it did not).
func (c *RunContext) CancelReason() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cancelReason
}

// outcomeOf maps a job's return to its outcome.
func outcomeOf(err error, rc *RunContext, ctx context.Context) Outcome {
	var target map[string]any
	var to *TargetOutcome
	if errors.As(err, &to) {
		target, err = to.Target, to.Err
	}
	if err == nil {
		return Outcome{Status: StatusSucceeded, Target: target}
	}
	if reason := rc.CancelReason(); reason != "" && (errors.Is(err, ErrCancelled) || ctx.Err() != nil) {
		return Outcome{Status: StatusCancelled, Error: &ErrorInfo{Type: RunCancelledType, Message: reason}}
	}
	var je *JobError
	if errors.As(err, &je) {
		return Outcome{Status: StatusFailed, Error: &ErrorInfo{Type: je.Type, Message: je.Message, RetryAfterS: je.RetryAfterS}, Target: target}
	}
	return Outcome{Status: StatusFailed, Error: &ErrorInfo{Type: "Error", Message: err.Error()}, Target: target}
}
