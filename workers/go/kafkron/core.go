package kafkron

// The worker's decisions, pure: runs in, results and offsets out. The port of
// actors/worker/core.py (docs/DESIGN.md §8, docs/WORKER-PROTOCOL.md §3-§9, §12).
// No goroutines, no Kafka, no clock reads: the runtime (worker.go) passes the time.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
)

// TimeoutMarginMs is topics/deadlines.py: TIMEOUT_MARGIN_MS.
const TimeoutMarginMs = 30_000

// CommitGuardMs is actors/worker/membership.py: COMMIT_GUARD_MS: the transaction
// timeout, the broker's abort reaper interval and the room to commit.
const CommitGuardMs = 10_000 + 10_000 + 5_000

// ShardDecides is topics/deadlines.py: shard_decides.
func ShardDecides(deadlineMs, nowMs int64) bool { return nowMs >= deadlineMs+TimeoutMarginMs }

// RunKey names a delivered run record: partition, offset and the adoption (lease).
type RunKey struct {
	Partition int32
	Offset    int64
	Lease     int
}

// Record is one fetched {ns}.runs record.
type Record struct {
	Partition int32
	Offset    int64
	Value     []byte
}

// Outcome is how a job exited.
type Outcome struct {
	Status string // succeeded, failed or cancelled
	Error  *ErrorInfo
	Target map[string]any
}

// StartJob asks the runtime to run a job.
type StartJob struct {
	Key RunKey
	Run *Run
}

// CancelJob asks the runtime to stop a job.
type CancelJob struct {
	Key    RunKey
	Reason string
}

// Discarded is a record that is no run (finished without a result).
type Discarded struct {
	Key    RunKey
	Reason string
}

// OutRecord is one result record: key (the schedule id) and value.
type OutRecord struct {
	Key   []byte
	Value []byte
}

// Commit is what one transaction writes for one partition.
type Commit struct {
	Partition int32
	Offset    int64
	Metadata  string
	Results   []OutRecord
	Runs      []*Run
	Lease     int
}

// AbortFromMs is the instant from which this commit must not commit (-1: no limit).
func (c *Commit) AbortFromMs() int64 {
	if len(c.Runs) == 0 {
		return -1
	}
	least := c.Runs[0].DeadlineMs
	for _, r := range c.Runs[1:] {
		if r.DeadlineMs < least {
			least = r.DeadlineMs
		}
	}
	return least + TimeoutMarginMs - CommitGuardMs
}

type runAttempt struct {
	runID   string
	attempt int
}

type running struct {
	run          *Run
	startedMs    int64
	decided      bool
	dropped      bool
	cancelled    *ErrorInfo
	cancelOffset int64 // -1: none
	progressMs   int64 // -1: none yet
}

type partState struct {
	offsets      *PartitionOffsets
	lease        int
	results      []OutRecord
	runs         []*Run
	inCommit     *Commit
	dirty        bool
	backlog      []Record
	cancelsAhead map[runAttempt]*Cancel
	catchUpTo    int64 // -1: caught up
}

type queued struct {
	key RunKey
	run *Run
}

// Core is the worker's behaviour (actors/worker/core.py: WorkerCore).
type Core struct {
	worker      string
	concurrency int
	known       func(string) bool
	maxOpen     int
	maxBacklog  int
	starting    bool
	parts       map[int32]*partState
	queue       []queued
	running     map[RunKey]*running
	Counts      map[string]int
}

// NewCore makes a core.
func NewCore(worker string, concurrency int, known func(string) bool) *Core {
	return &Core{
		worker: worker, concurrency: concurrency, known: known,
		maxOpen: MaxOpenPerPartition, maxBacklog: MaxBacklogPerPartition, starting: true,
		parts: map[int32]*partState{}, running: map[RunKey]*running{}, Counts: map[string]int{},
	}
}

// Assign: the partition is ours from committed on; endOffset (-1: unknown) is the
// partition's last stable offset read at adoption: no run starts before it is read.
func (c *Core) Assign(partition int32, committed int64, metadata string, lease int, endOffset int64) {
	if _, ok := c.parts[partition]; ok {
		return
	}
	part := &partState{
		offsets: NewPartitionOffsets(committed, metadata), lease: lease,
		cancelsAhead: map[runAttempt]*Cancel{}, catchUpTo: -1,
	}
	if endOffset > part.offsets.FetchFrom() {
		part.catchUpTo = endOffset
	}
	c.parts[partition] = part
}

// Assigned lists the partitions the core holds.
func (c *Core) Assigned() []int32 {
	out := make([]int32, 0, len(c.parts))
	for p := range c.parts {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Lease is the adoption number of a held partition (-1 if not held).
func (c *Core) Lease(partition int32) int {
	if part, ok := c.parts[partition]; ok {
		return part.lease
	}
	return -1
}

// CatchingUp says whether a partition waits to be read to its adoption's end.
func (c *Core) CatchingUp(partition int32) bool {
	part, ok := c.parts[partition]
	return ok && part.catchUpTo >= 0
}

// CaughtUp reports the consumer's position (the next offset it fetches).
func (c *Core) CaughtUp(partition int32, position, nowMs int64) []any {
	part, ok := c.parts[partition]
	if !ok || part.catchUpTo < 0 || position < part.catchUpTo {
		return nil
	}
	part.catchUpTo = -1
	return c.Fill(nowMs)
}

// Revoke drops a partition: its jobs are cancelled, its results dropped.
func (c *Core) Revoke(partition int32, reason string) []any {
	if _, ok := c.parts[partition]; !ok {
		return nil
	}
	delete(c.parts, partition)
	kept := c.queue[:0]
	for _, q := range c.queue {
		if q.key.Partition != partition {
			kept = append(kept, q)
		}
	}
	c.queue = kept
	var actions []any
	for key, r := range c.running {
		if key.Partition == partition && !r.dropped {
			r.dropped = true
			c.Counts["dropped"]++
			actions = append(actions, CancelJob{key, reason})
		}
	}
	return actions
}

// FetchPosition is where the consumer should fetch the partition from (-1: not ours).
func (c *Core) FetchPosition(partition int32) int64 {
	part, ok := c.parts[partition]
	if !ok {
		return -1
	}
	if n := len(part.backlog); n > 0 {
		return part.backlog[n-1].Offset + 1
	}
	return part.offsets.FetchFrom()
}

// Paused says whether the partition's backlog is full (stop fetching it).
func (c *Core) Paused(partition int32) bool {
	part, ok := c.parts[partition]
	return ok && len(part.backlog) >= c.maxBacklog
}

// Receive takes one fetched record without starting jobs; end the fetch with Fill.
func (c *Core) Receive(rec Record, nowMs int64) []any {
	part, ok := c.parts[rec.Partition]
	if !ok {
		return nil
	}
	full := part.offsets.HeldCount() >= c.maxOpen
	cancel := IsCancel(rec.Value)
	if part.offsets.AddsOpen(rec.Offset) && (len(part.backlog) > 0 || (full && !cancel)) {
		var actions []any
		n := len(part.backlog)
		if n == 0 || rec.Offset > part.backlog[n-1].Offset {
			part.backlog = append(part.backlog, rec)
			if cancel {
				actions = c.cancelAhead(part, rec, nowMs)
			}
		}
		if len(part.backlog) >= c.maxBacklog && part.catchUpTo >= 0 {
			part.catchUpTo = -1
		}
		return actions
	}
	return c.deliver(part, rec, nowMs)
}

func (c *Core) deliver(part *partState, rec Record, nowMs int64) []any {
	if !part.offsets.Deliver(rec.Offset) {
		return nil
	}
	c.Counts["received"]++
	key := RunKey{rec.Partition, rec.Offset, part.lease}
	if IsCancel(rec.Value) {
		return c.cancel(part, rec, key, nowMs)
	}
	run, err := ParseRun(rec.Value)
	if err != nil {
		c.finish(part, rec.Offset)
		c.Counts["discarded"]++
		return []any{Discarded{key, "not a run record: " + err.Error()}}
	}
	if ca, ok := part.cancelsAhead[runAttempt{run.RunID, run.Attempt}]; ok {
		c.record(part, rec.Offset, run, StatusCancelled, nil, nowMs, cancelError(ca), nil)
		return nil
	}
	if run.Job.Keyed {
		// Running it here could put the key over its limit: refuse it, visibly.
		c.record(part, rec.Offset, run, StatusFailed, &nowMs, nowMs, &ErrorInfo{
			Type: ConcurrencyUnsupportedType,
			Message: fmt.Sprintf("worker %s (Go) does not keep concurrency keys; serve runs"+
				" with a concurrency key by Python workers only", c.worker),
		}, nil)
		return nil
	}
	if run.Job.RateLimited {
		// Running it here could put the key over its rate (and past its pause): refuse it.
		c.record(part, rec.Offset, run, StatusFailed, &nowMs, nowMs, &ErrorInfo{
			Type: RateLimitUnsupportedType,
			Message: fmt.Sprintf("worker %s (Go) does not keep rate limits; serve runs"+
				" with a rate limit by Python workers only", c.worker),
		}, nil)
		return nil
	}
	if !c.known(run.Job.Name) {
		c.record(part, rec.Offset, run, StatusFailed, &nowMs, nowMs, &ErrorInfo{
			Type: UnknownJobType,
			Message: fmt.Sprintf("worker %s has no job named %q; start workers that register it",
				c.worker, run.Job.Name),
		}, nil)
		return nil
	}
	c.queue = append(c.queue, queued{key, run})
	return nil
}

func (c *Core) cancel(part *partState, rec Record, key RunKey, nowMs int64) []any {
	ca, err := ParseCancel(rec.Value)
	if err != nil {
		c.finish(part, rec.Offset)
		c.Counts["discarded"]++
		return []any{Discarded{key, "not a cancel record: " + err.Error()}}
	}
	c.Counts["cancels"]++
	delete(part.cancelsAhead, runAttempt{ca.RunID, ca.Attempt})
	actions, stopping := c.applyCancel(part, ca, key.Partition, key.Lease, nowMs)
	if stopping != nil && stopping.cancelOffset < 0 {
		stopping.cancelOffset = rec.Offset // finished with the job's result
	} else {
		c.finish(part, rec.Offset)
	}
	return actions
}

func (c *Core) cancelAhead(part *partState, rec Record, nowMs int64) []any {
	ca, err := ParseCancel(rec.Value)
	if err != nil {
		return nil
	}
	part.cancelsAhead[runAttempt{ca.RunID, ca.Attempt}] = ca
	actions, _ := c.applyCancel(part, ca, rec.Partition, part.lease, nowMs)
	return actions
}

func (c *Core) applyCancel(part *partState, ca *Cancel, partition int32, lease int, nowMs int64) ([]any, *running) {
	for i, q := range c.queue {
		if q.key.Partition == partition && q.key.Lease == lease && q.run.RunID == ca.RunID && q.run.Attempt == ca.Attempt {
			c.queue = append(c.queue[:i], c.queue[i+1:]...)
			c.record(part, q.key.Offset, q.run, StatusCancelled, nil, nowMs, cancelError(ca), nil)
			return nil, nil
		}
	}
	for key, r := range c.running {
		if key.Partition == partition && key.Lease == lease && !r.decided && !r.dropped &&
			r.run.RunID == ca.RunID && r.run.Attempt == ca.Attempt {
			if r.cancelled != nil {
				return nil, r
			}
			r.cancelled = cancelError(ca)
			return []any{CancelJob{key, "cancelled: " + ca.Reason}}, r
		}
	}
	return nil, nil
}

// Fill starts queued runs while slots are free.
func (c *Core) Fill(nowMs int64) []any {
	if !c.starting {
		return nil
	}
	var actions []any
	var held []queued
	for len(c.queue) > 0 && len(c.running) < c.concurrency {
		q := c.queue[0]
		c.queue = c.queue[1:]
		part := c.parts[q.key.Partition]
		if part.catchUpTo >= 0 {
			held = append(held, q)
			continue
		}
		if q.run.DeadlineMs <= nowMs {
			c.record(part, q.key.Offset, q.run, StatusTimedOut, &nowMs, nowMs, timeoutError(q.run, false), nil)
			continue
		}
		c.running[q.key] = &running{run: q.run, startedMs: nowMs, cancelOffset: -1, progressMs: -1}
		c.Counts["started"]++
		actions = append(actions, StartJob{q.key, q.run})
		if q.run.ReportStart {
			c.reportStart(part, q.run, nowMs)
		}
	}
	if len(held) > 0 {
		c.queue = append(held, c.queue...)
	}
	return actions
}

// JobExited: the job of key returned, failed or stopped; its slot is free.
func (c *Core) JobExited(key RunKey, out Outcome, nowMs int64) []any {
	r, ok := c.running[key]
	if !ok {
		return nil
	}
	delete(c.running, key)
	if !r.decided && !r.dropped {
		if part, ok := c.parts[key.Partition]; ok && part.lease == key.Lease {
			started := r.startedMs
			if r.cancelled != nil {
				c.record(part, key.Offset, r.run, StatusCancelled, &started, nowMs, r.cancelled, nil)
			} else {
				c.record(part, key.Offset, r.run, out.Status, &started, nowMs, out.Error, out.Target)
			}
			if r.cancelOffset >= 0 {
				c.finish(part, r.cancelOffset)
			}
		}
	}
	actions := c.refill(key.Partition, nowMs)
	return append(actions, c.Fill(nowMs)...)
}

// reportStart: the run's schedule has a start deadline, so its shard learns the
// start from a progress report (details null) in the partition's next commit, the one
// record a worker writes per attempt for it (docs/WORKER-PROTOCOL.md §8.3;
// actors/worker/core.py: WorkerCore._report_start). It is not the job's heartbeat:
// progressMs stays unset, so the job's first Heartbeat still goes out at once.
func (c *Core) reportStart(part *partState, run *Run, startedMs int64) {
	started := startedMs
	value := ResultValue(run, StatusRunning, &started, nil, c.worker, nil, &Progress{nil, startedMs}, nil)
	part.results = append(part.results, OutRecord{[]byte(run.ScheduleID), value})
	part.runs = append(part.runs, run)
	part.dirty = true
	c.Counts["start_reports"]++
}

// Progress: a running job reported progress (docs/WORKER-PROTOCOL.md §8).
func (c *Core) Progress(key RunKey, details any, atMs, nowMs int64) {
	r, ok := c.running[key]
	if !ok || r.decided || r.dropped || r.cancelled != nil {
		return
	}
	part, ok := c.parts[key.Partition]
	if !ok || part.lease != key.Lease || ShardDecides(r.run.DeadlineMs, nowMs) {
		return
	}
	if r.progressMs >= 0 && atMs-r.progressMs < ProgressIntervalMs {
		return
	}
	r.progressMs = atMs
	started := r.startedMs
	value := ResultValue(r.run, StatusRunning, &started, nil, c.worker, nil, &Progress{details, atMs}, nil)
	part.results = append(part.results, OutRecord{[]byte(r.run.ScheduleID), value})
	part.runs = append(part.runs, r.run)
	part.dirty = true
	c.Counts["progress"]++
}

// Advance enforces deadlines (docs/WORKER-PROTOCOL.md §7).
func (c *Core) Advance(nowMs int64) []any {
	var actions []any
	keys := make([]RunKey, 0, len(c.running))
	for key := range c.running {
		keys = append(keys, key)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].Offset < keys[j].Offset })
	for _, key := range keys {
		r := c.running[key]
		if r.decided || r.dropped || r.run.DeadlineMs > nowMs {
			continue
		}
		r.decided = true
		part := c.parts[key.Partition]
		started := r.startedMs
		if r.cancelled != nil {
			e := &ErrorInfo{Type: r.cancelled.Type, Message: fmt.Sprintf(
				"%s (the job was still running at its deadline %s)", r.cancelled.Message, FormatMs(r.run.DeadlineMs))}
			c.record(part, key.Offset, r.run, StatusCancelled, &started, nowMs, e, nil)
			if r.cancelOffset >= 0 {
				c.finish(part, r.cancelOffset)
			}
			continue
		}
		c.record(part, key.Offset, r.run, StatusTimedOut, &started, nowMs, timeoutError(r.run, true), nil)
		actions = append(actions, CancelJob{key, "timeout"})
	}
	for p := range c.parts {
		actions = append(actions, c.refill(p, nowMs)...)
	}
	return append(actions, c.Fill(nowMs)...)
}

func (c *Core) refill(partition int32, nowMs int64) []any {
	part, ok := c.parts[partition]
	if !ok {
		return nil
	}
	var actions []any
	for len(part.backlog) > 0 && part.offsets.HeldCount() < c.maxOpen {
		rec := part.backlog[0]
		part.backlog = part.backlog[1:]
		actions = append(actions, c.deliver(part, rec, nowMs)...)
	}
	return actions
}

// TakeCommit is what to write for the partition now, or nil. A commit without a
// result record is not taken: the offset moves with the next one (the records it
// finished are decided again, with no result, if they are delivered again).
func (c *Core) TakeCommit(partition int32, nowMs int64) *Commit {
	part, ok := c.parts[partition]
	if !ok || part.inCommit != nil || !part.dirty || len(part.results) == 0 {
		return nil
	}
	// Results the shard decides before a transaction could commit them are dropped.
	results, runs := part.results[:0:0], part.runs[:0:0]
	for i, run := range part.runs {
		if ShardDecides(run.DeadlineMs, nowMs+CommitGuardMs) {
			c.Counts["left_to_shard"]++
			continue
		}
		results = append(results, part.results[i])
		runs = append(runs, run)
	}
	part.results, part.runs = nil, nil
	if len(results) == 0 {
		return nil
	}
	commit := &Commit{
		Partition: partition, Offset: part.offsets.CommitOffset(), Metadata: part.offsets.Metadata(),
		Results: results, Runs: runs, Lease: part.lease,
	}
	part.dirty = false
	part.inCommit = commit
	return commit
}

// CommitDone: the transaction committed.
func (c *Core) CommitDone(commit *Commit) {
	if part, ok := c.parts[commit.Partition]; ok && part.inCommit == commit {
		part.offsets.MarkCommitted(commit.Offset)
		part.inCommit = nil
	}
}

// CommitFailed: the transaction aborted (nothing visible); its results are taken again.
func (c *Core) CommitFailed(commit *Commit) {
	part, ok := c.parts[commit.Partition]
	if !ok || part.inCommit != commit {
		return
	}
	part.results = append(append([]OutRecord(nil), commit.Results...), part.results...)
	part.runs = append(append([]*Run(nil), commit.Runs...), part.runs...)
	part.dirty = true
	part.inCommit = nil
}

// ResultRefusedType is the error type of a result that replaces one the broker refused.
const ResultRefusedType = "ResultRefused"

// CommitRefused: the transaction was aborted because the broker refused the records
// of these results (indices of commit.Results) for good: too large for
// {ns}.results, say (actors/worker/core.py: WorkerCore.commit_refused). Writing them
// again would fail forever and stall the partition, so a refused result is replaced
// by the smallest one that says what happened (status failed, error ResultRefused,
// no start or finish, the job's own error dropped); a refused progress report is
// dropped; if the smallest one was itself refused, the result is dropped and its
// offset stays finished: the shard decides the attempt at its deadline (timed_out).
// The rest is taken again as it was.
func (c *Core) CommitRefused(commit *Commit, refused []int, reason string) {
	part, ok := c.parts[commit.Partition]
	if !ok || part.inCommit != commit {
		return
	}
	bad := map[int]bool{}
	for _, i := range refused {
		bad[i] = true
	}
	var results []OutRecord
	var runs []*Run
	for i, record := range commit.Results {
		run := commit.Runs[i]
		if !bad[i] {
			results, runs = append(results, record), append(runs, run)
			continue
		}
		c.Counts["refused"]++
		if isProgress(record.Value) {
			continue // a progress report is not the attempt's result
		}
		why := &ErrorInfo{Type: ResultRefusedType,
			Message: fmt.Sprintf("the broker refused this attempt's result record (%s)", reason)}
		value := ResultValue(run, StatusFailed, nil, nil, c.worker, why, nil, nil)
		if bytes.Equal(value, record.Value) { // the smallest one was refused too
			c.Counts["left_to_shard"]++
			continue
		}
		results = append(results, OutRecord{[]byte(run.ScheduleID), value})
		runs = append(runs, run)
	}
	part.results = append(results, part.results...)
	part.runs = append(runs, part.runs...)
	part.dirty = true
	part.inCommit = nil
}

func isProgress(value []byte) bool {
	var head struct {
		Status string `json:"status"`
	}
	return json.Unmarshal(value, &head) == nil && head.Status == StatusRunning
}

// StopStarting: drain, no queued run starts.
func (c *Core) StopStarting() { c.starting = false }

// Drained: nothing running, nothing to commit.
func (c *Core) Drained() bool {
	if len(c.running) > 0 {
		return false
	}
	for _, part := range c.parts {
		if part.inCommit != nil || len(part.results) > 0 {
			return false
		}
	}
	return true
}

// Running is the number of jobs holding a slot.
func (c *Core) Running() int { return len(c.running) }

func (c *Core) record(part *partState, offset int64, run *Run, status string, startedMs *int64,
	finishedMs int64, errInfo *ErrorInfo, target map[string]any) {
	if ShardDecides(run.DeadlineMs, finishedMs) {
		c.Counts["left_to_shard"]++
		c.finish(part, offset)
		return
	}
	value := ResultValue(run, status, startedMs, &finishedMs, c.worker, errInfo, nil, target)
	part.results = append(part.results, OutRecord{[]byte(run.ScheduleID), value})
	part.runs = append(part.runs, run)
	c.Counts[status]++
	c.finish(part, offset)
}

func (c *Core) finish(part *partState, offset int64) {
	part.offsets.Finish(offset)
	part.dirty = true
}

func cancelError(ca *Cancel) *ErrorInfo {
	return &ErrorInfo{Type: CancelledType, Message: ca.Reason}
}

func timeoutError(run *Run, started bool) *ErrorInfo {
	deadline := FormatMs(run.DeadlineMs)
	if started {
		return &ErrorInfo{Type: TimeoutType, Message: fmt.Sprintf(
			"run %s attempt %d was still running at its deadline %s", run.RunID, run.Attempt, deadline)}
	}
	return &ErrorInfo{Type: TimeoutType, Message: fmt.Sprintf(
		"run %s attempt %d reached its deadline %s before a worker slot was free; add workers or raise --concurrency",
		run.RunID, run.Attempt, deadline)}
}
