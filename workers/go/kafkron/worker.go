package kafkron

// The Go worker's runtime on franz-go (docs/WORKER-PROTOCOL.md): the group consumer of
// {ns}.runs, one transactional producer per adopted partition, the jobs, and one loop
// that owns every decision's state (the Core and the partitions' membership).

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Options of one worker process.
type Options struct {
	Namespace      string
	Bootstrap      []string
	WorkerID       string
	Concurrency    int
	SessionTimeout time.Duration
	Drain          time.Duration
	LeaseLossBeats int // 0: the lease rule is off
	Registry       *Registry
	Logger         *log.Logger
	ClientOpts     []kgo.Opt // every client's security (Security.Opts), none for PLAINTEXT
}

// clientOpts: the brokers and the security, then opts.
func (w *Worker) clientOpts(opts ...kgo.Opt) []kgo.Opt {
	all := append([]kgo.Opt{kgo.SeedBrokers(w.opts.Bootstrap...)}, w.opts.ClientOpts...)
	return append(all, opts...)
}

const (
	slotAdopting = iota
	slotLive
	slotLost
	slotBackoff
	adoptRetry        = 500 * time.Millisecond
	adoptRetryMax     = 10 * time.Second
	commitRetry       = 500 * time.Millisecond
	commitRetryMax    = 5 * time.Second
	failuresToReadopt = 6
	tickEvery         = 50 * time.Millisecond
)

type slot struct {
	state      int
	lease      int
	producer   *kgo.Client
	since      int64 // lost: when; backoff: when to retry
	failures   int
	adoptFails int
	writing    bool
	writeAfter int64
}

type jobHandle struct {
	cancel context.CancelFunc
	rc     *RunContext
}

// Worker is one worker process.
type Worker struct {
	opts      Options
	names     Names
	core      *Core
	consumer  *kgo.Client
	admin     *kadm.Client
	adminCl   *kgo.Client
	events    chan func()
	closed    chan struct{}
	slots     map[int32]*slot
	nextLease int
	jobs      map[RunKey]*jobHandle
	positions map[int32]int64
	floor     BrokerFloor
	start     time.Time
	lastHeard atomic.Int64 // monotonic ms of the last answer of the group coordinator
	// monotonic ms the last answered SyncGroup request was sent (its assignment's lease)
	lastSyncSent atomic.Int64
	rebalance    bool
	holdUntil    int64 // a rebalance's hold (only while rebalance)
	syncHold     int64 // the last assignment's hold (lease.go)
	lostAt       int64
	live         string
}

// NewWorker makes a worker; Run starts it.
func NewWorker(opts Options) *Worker {
	if opts.Logger == nil {
		opts.Logger = log.Default()
	}
	w := &Worker{
		opts: opts, names: Names{opts.Namespace}, events: make(chan func(), 4096), closed: make(chan struct{}),
		slots: map[int32]*slot{}, jobs: map[RunKey]*jobHandle{}, positions: map[int32]int64{}, start: time.Now(),
	}
	w.core = NewCore(opts.WorkerID, opts.Concurrency, func(name string) bool {
		_, ok := opts.Registry.Lookup(name)
		return ok
	})
	return w
}

func (w *Worker) mono() int64 { return time.Since(w.start).Milliseconds() }

func (w *Worker) now() int64 { return w.floor.NowMs(time.Now().UnixMilli(), w.mono()) }

func (w *Worker) heartbeatInterval() time.Duration {
	hb := w.opts.SessionTimeout / 5
	if hb < 100*time.Millisecond {
		hb = 100 * time.Millisecond
	}
	return hb
}

func (w *Worker) post(f func()) {
	select {
	case w.events <- f:
	case <-w.closed:
	}
}

// answered: a group request answered without error (group_answers.go) is the
// coordinator heard (the lease), as of when the request was sent (WORKER-PROTOCOL
// 10.1): a process frozen while it waited for the answer reads it late, and must not
// count the freeze as heard.
func (w *Worker) answered(key int16, sentMs int64) {
	storeLater(&w.lastHeard, sentMs)
	if key == keySyncGroup { // the assignment onAssigned applies next
		storeLater(&w.lastSyncSent, sentMs)
	}
}

// storeLater keeps the later of the stored instant and at (answers may be read out of
// the order their requests were sent).
func storeLater(v *atomic.Int64, at int64) {
	for {
		old := v.Load()
		if at <= old || v.CompareAndSwap(old, at) {
			return
		}
	}
}

// groupAnswers tells answered of the consumer's group answers without error, and the
// log of a connection whose answers it stops reading.
func (w *Worker) groupAnswers() groupAnswers {
	return groupAnswers{nowMs: w.mono, heard: w.answered, logf: func(format string, args ...any) {
		w.opts.Logger.Printf("worker %s: "+format, append([]any{w.opts.WorkerID}, args...)...)
	}}
}

// consumerOpts: dial is the other clients' dial function (their TLS included); the
// consumer's connections are read by groupAnswers (DialTLSConfig(nil): franz-go takes
// one of the two, and dial already dials TLS).
func (w *Worker) consumerOpts(dial dialFunc) []kgo.Opt {
	return w.clientOpts(
		kgo.ClientID("kafkron-worker-"+w.opts.WorkerID),
		kgo.ConsumerGroup(w.names.WorkerGroup()),
		kgo.ConsumeTopics(w.names.Topic("runs")),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.DisableAutoCommit(),
		kgo.KeepControlRecords(),
		kgo.Balancers(kgo.RoundRobinBalancer()),
		kgo.SessionTimeout(w.opts.SessionTimeout),
		kgo.HeartbeatInterval(w.heartbeatInterval()),
		kgo.RebalanceTimeout(2*w.opts.SessionTimeout),
		kgo.FetchMaxWait(50*time.Millisecond),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DialTLSConfig(nil),
		kgo.Dialer(w.groupAnswers().dialer(dial)),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, _ map[string][]int32) {
			w.post(w.onRebalanceStarted)
		}),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
			parts := append([]int32(nil), assigned[w.names.Topic("runs")]...)
			w.post(func() { w.onAssigned(parts) })
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
			parts := append([]int32(nil), lost[w.names.Topic("runs")]...)
			w.post(func() { w.onLost(parts) })
		}),
	)
}

// Run consumes and runs until ctx is done, then drains and leaves the group.
func (w *Worker) Run(ctx context.Context) error {
	var err error
	if w.adminCl, err = kgo.NewClient(w.clientOpts()...); err != nil {
		return err
	}
	w.admin = kadm.NewClient(w.adminCl)
	dial, ok := w.adminCl.OptValue(kgo.Dialer).(dialFunc)
	if !ok || dial == nil {
		return errors.New("franz-go gave no dial function")
	}
	if w.consumer, err = kgo.NewClient(w.consumerOpts(dial)...); err != nil {
		return err
	}
	w.lastHeard.Store(w.mono())
	w.opts.Logger.Printf("worker %s: jobs %s, concurrency %d, group %s", w.opts.WorkerID,
		strings.Join(w.opts.Registry.Names(), ", "), w.opts.Concurrency, w.names.WorkerGroup())
	pollCtx, stopPoll := context.WithCancel(context.Background())
	fetches := make(chan kgo.Fetches)
	go func() {
		for {
			fs := w.consumer.PollRecords(pollCtx, 1000)
			if pollCtx.Err() != nil {
				return
			}
			select {
			case fetches <- fs:
			case <-pollCtx.Done():
				return
			}
		}
	}()
	ticker := time.NewTicker(tickEvery)
	defer ticker.Stop()
	drainUntil := time.Time{}
	for {
		select {
		case f := <-w.events:
			f()
		case fs := <-fetches:
			w.onFetches(fs)
		case <-ticker.C:
			w.tick()
		case <-ctx.Done():
		}
		if ctx.Err() != nil && drainUntil.IsZero() {
			drainUntil = time.Now().Add(w.opts.Drain)
			w.core.StopStarting()
			w.opts.Logger.Printf("worker %s: draining", w.opts.WorkerID)
		}
		if !drainUntil.IsZero() && (w.core.Drained() && !w.anyWriting() || time.Now().After(drainUntil)) {
			break
		}
	}
	stopPoll()
	for p := range w.slots {
		w.drop(p, "worker stopping")
	}
	close(w.closed)
	w.consumer.Close()
	w.adminCl.Close()
	return nil
}

func (w *Worker) anyWriting() bool {
	for _, s := range w.slots {
		if s.writing {
			return true
		}
	}
	return false
}

func (w *Worker) apply(actions []any) {
	for _, a := range actions {
		switch act := a.(type) {
		case StartJob:
			w.startJob(act)
		case CancelJob:
			if h, ok := w.jobs[act.Key]; ok {
				h.rc.requestCancel(act.Reason)
				h.cancel()
			}
		case Discarded:
			w.opts.Logger.Printf("skipping record %d of %s[%d]: %s", act.Key.Offset, w.names.Topic("runs"), act.Key.Partition, act.Reason)
		}
	}
}

func (w *Worker) startJob(act StartJob) {
	fn, _ := w.opts.Registry.Lookup(act.Run.Job.Name)
	ctx, cancel := context.WithCancel(context.Background())
	key := act.Key
	rc := &RunContext{Run: act.Run, Args: act.Run.Job.Args, Worker: w.opts.WorkerID}
	rc.onProgress = func(details any, at int64) {
		w.post(func() { w.core.Progress(key, details, at, w.now()) })
	}
	w.jobs[key] = &jobHandle{cancel, rc}
	go func() {
		var out Outcome
		func() {
			defer func() {
				if p := recover(); p != nil {
					out = Outcome{Status: StatusFailed, Error: &ErrorInfo{Type: "Panic", Message: fmt.Sprint(p)}}
				}
			}()
			out = outcomeOf(fn(ctx, rc), rc, ctx)
		}()
		cancel()
		w.post(func() {
			delete(w.jobs, key)
			w.checkLease() // the exit may start the next queued run: not past the lease
			w.apply(w.core.JobExited(key, out, w.now()))
		})
	}()
}

// --- the group --------------------------------------------------------------------

func (w *Worker) onRebalanceStarted() {
	w.rebalance = true
	rebalanceMs := 2 * w.opts.SessionTimeout.Milliseconds()
	w.holdUntil = w.lastHeard.Load() + rebalanceMs - w.heartbeatInterval().Milliseconds()
}

func (w *Worker) onAssigned(partitions []int32) {
	w.rebalance = false
	// The assignment renews the lease from when its SyncGroup request was sent, not
	// from when it was applied: a stale answer re-adopts nothing lost after it was sent.
	// It holds it for the session from then, less a heartbeat (syncHoldMs): a
	// follower's SyncGroup waits for the leader's, at times longer than the lease rule.
	sent := w.lastSyncSent.Load()
	storeLater(&w.lastHeard, sent)
	w.syncHold = sent + w.syncHoldMs()
	// An answer read after the lease it renews ran out (a freeze between its send and
	// its read) adopts nothing: the group may have given those partitions away since.
	// They wait, lost, for a heartbeat sent from now on (checkLease's tick adopts them).
	expired := !w.leaseHolds(w.mono())
	wanted := map[int32]bool{}
	for _, p := range partitions {
		wanted[p] = true
	}
	for p := range w.slots {
		if !wanted[p] {
			w.drop(p, "revoked")
			delete(w.slots, p)
		}
	}
	for _, p := range partitions {
		s, ok := w.slots[p]
		switch {
		case !ok && expired:
			w.slots[p] = &slot{state: slotLost, since: w.mono()}
		case !ok:
			w.slots[p] = &slot{}
			w.adopt(p)
		case s.state == slotLive:
			w.seek(p, w.core.FetchPosition(p)) // eager rebalancing restarted its fetch
		case s.state == slotLost && expired:
			s.since = w.mono()
		case s.state == slotLost:
			w.adopt(p)
		}
	}
	w.settle()
}

func (w *Worker) onLost(partitions []int32) {
	for _, p := range partitions {
		if _, ok := w.slots[p]; ok {
			w.drop(p, "lost")
			delete(w.slots, p)
		}
	}
	w.settle()
}

// drop leaves a partition: its jobs cancelled, its results dropped, its producer closed.
func (w *Worker) drop(p int32, reason string) {
	w.apply(w.core.Revoke(p, reason))
	if s, ok := w.slots[p]; ok && s.producer != nil {
		go s.producer.Close()
		s.producer = nil
	}
}

func (w *Worker) adopt(p int32) {
	s := w.slots[p]
	// Past the lease no adoption starts: its producer's init would fence the
	// partition's new owner, retry after retry while the group coordinator is out of
	// reach and the transaction coordinator is not. Lost as of now: only a request sent
	// after this adopts it again.
	if mono := w.mono(); !w.leaseHolds(mono) {
		w.checkLease()
		s.state, s.since, s.writing = slotLost, mono, false
		return
	}
	w.nextLease++
	s.state, s.lease, s.writing = slotAdopting, w.nextLease, false
	lease := s.lease
	w.consumer.PauseFetchPartitions(map[string][]int32{w.names.Topic("runs"): {p}})
	go func() {
		producer, start, metadata, end, err := w.fenceAndRead(p)
		w.post(func() { w.adopted(p, lease, producer, start, metadata, end, err) })
	}()
}

// fenceAndRead: fence first, then read the committed offset and the end (§3.1).
func (w *Worker) fenceAndRead(p int32) (*kgo.Client, int64, string, int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	producer, err := kgo.NewClient(w.clientOpts(
		kgo.ClientID(fmt.Sprintf("kafkron-worker-%s-%d", w.opts.WorkerID, p)),
		kgo.TransactionalID(w.names.WorkerTransactionalID(p)),
		kgo.TransactionTimeout(TransactionTimeout),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
		kgo.ProducerLinger(0),
		// Readers of {ns}.results (the shards, on aiokafka) may have no snappy, lz4 or
		// zstd library: results go uncompressed (docs/WORKER-PROTOCOL.md §5.4).
		kgo.ProducerBatchCompression(kgo.NoCompression()),
	)...)
	if err != nil {
		return nil, 0, "", 0, err
	}
	fail := func(err error) (*kgo.Client, int64, string, int64, error) {
		producer.Close()
		return nil, 0, "", 0, err
	}
	if _, _, err := producer.ProducerID(ctx); err != nil {
		return fail(fmt.Errorf("fencing %s: %w", w.names.WorkerTransactionalID(p), err))
	}
	start, metadata, err := w.readCommitted(ctx, p)
	if err != nil {
		return fail(err)
	}
	runs := w.names.Topic("runs")
	ends, err := w.admin.ListCommittedOffsets(ctx, runs)
	if err != nil {
		return fail(err)
	}
	lso, ok := ends.Lookup(runs, p)
	if !ok || lso.Err != nil {
		return fail(fmt.Errorf("no last stable offset of %s[%d]: %v", runs, p, lso.Err))
	}
	if start < 0 {
		starts, err := w.admin.ListStartOffsets(ctx, runs)
		if err != nil {
			return fail(err)
		}
		first, ok := starts.Lookup(runs, p)
		if !ok || first.Err != nil {
			return fail(fmt.Errorf("no start offset of %s[%d]", runs, p))
		}
		start, metadata = first.Offset, ""
	}
	return producer, start, metadata, lso.Offset, nil
}

// readCommitted: the group's committed offset of p and its metadata (-1: none). A
// group-level error is an error to retry, never "nothing committed" (§3.2).
func (w *Worker) readCommitted(ctx context.Context, p int32) (int64, string, error) {
	resps, err := w.admin.FetchOffsets(ctx, w.names.WorkerGroup())
	if err != nil {
		return 0, "", fmt.Errorf("reading what %s committed: %w", w.names.WorkerGroup(), err)
	}
	if err := resps.Error(); err != nil {
		return 0, "", err
	}
	got, ok := resps.Lookup(w.names.Topic("runs"), p)
	if !ok || got.At < 0 {
		return -1, "", nil
	}
	return got.At, got.Metadata, nil
}

func (w *Worker) adopted(p int32, lease int, producer *kgo.Client, start int64, metadata string, end int64, err error) {
	// Answered past the lease (a process thawed mid-adoption, before the tick that finds
	// the lease gone): the partition is lost with the rest and this producer closed.
	w.checkLease()
	s, ok := w.slots[p]
	if !ok || s.lease != lease || s.state != slotAdopting {
		if producer != nil {
			go producer.Close()
		}
		return
	}
	if err != nil {
		s.adoptFails++
		delay := adoptRetry << min(s.adoptFails-1, 5)
		if delay > adoptRetryMax {
			delay = adoptRetryMax
		}
		s.state, s.since = slotBackoff, w.now()+delay.Milliseconds()
		w.opts.Logger.Printf("adopting runs partition %d failed (%v); trying again in %s", p, err, delay)
		return
	}
	s.state, s.producer, s.adoptFails, s.failures, s.writeAfter = slotLive, producer, 0, 0, 0
	w.core.Assign(p, start, metadata, lease, end)
	w.seek(p, w.core.FetchPosition(p))
	w.settle()
}

func (w *Worker) seek(p int32, offset int64) {
	if offset < 0 {
		return
	}
	w.consumer.SetOffsets(map[string]map[int32]kgo.EpochOffset{w.names.Topic("runs"): {p: {Epoch: -1, Offset: offset}}})
	w.positions[p] = offset
}

// settle pauses what must not be fetched, resumes the rest, and logs ownership.
func (w *Worker) settle() {
	runs := w.names.Topic("runs")
	var pause, resume, live []int32
	for p, s := range w.slots {
		if s.state != slotLive || w.core.Paused(p) {
			pause = append(pause, p)
		} else {
			resume = append(resume, p)
			live = append(live, p)
		}
	}
	if len(pause) > 0 {
		w.consumer.PauseFetchPartitions(map[string][]int32{runs: pause})
	}
	if len(resume) > 0 {
		w.consumer.ResumeFetchPartitions(map[string][]int32{runs: resume})
	}
	sort.Slice(live, func(i, j int) bool { return live[i] < live[j] })
	settled := true
	for _, s := range w.slots {
		if s.state == slotAdopting {
			settled = false
		}
	}
	text := fmt.Sprint(live)
	if len(live) == 0 {
		text = "none"
	} else {
		text = strings.ReplaceAll(text, " ", ", ")
	}
	if settled && text != w.live {
		w.live = text
		w.opts.Logger.Printf("worker %s owns runs partitions %s", w.opts.WorkerID, text)
	}
}

// --- records ----------------------------------------------------------------------

func (w *Worker) onFetches(fs kgo.Fetches) {
	// No run starts past the lease, even in a turn that comes before the tick (a
	// thawed process's first fetch): the partitions go first.
	w.checkLease()
	mono := w.mono()
	var appended int64
	var records []Record
	fs.EachRecord(func(r *kgo.Record) {
		if r.Attrs.TimestampType() == 1 && r.Timestamp.UnixMilli() > appended {
			appended = r.Timestamp.UnixMilli()
		}
		s, ok := w.slots[r.Partition]
		if !ok || s.state != slotLive {
			return // not adopted (yet): fetched again after its seek (§3.4)
		}
		if r.Offset+1 > w.positions[r.Partition] {
			w.positions[r.Partition] = r.Offset + 1
		}
		if r.Attrs.IsControl() {
			return
		}
		records = append(records, Record{r.Partition, r.Offset, r.Value})
	})
	w.floor.Observe(appended, mono)
	now := w.now()
	for _, rec := range records {
		w.apply(w.core.Receive(rec, now))
	}
	w.apply(w.core.Fill(now)) // a whole fetch delivered before any job starts (§9.3)
	for p := range w.slots {
		if w.core.CatchingUp(p) {
			w.apply(w.core.CaughtUp(p, w.positions[p], now))
		}
	}
	w.settle()
}

// --- time -------------------------------------------------------------------------

func (w *Worker) tick() {
	now := w.now()
	w.apply(w.core.Advance(now))
	w.checkLease()
	for p, s := range w.slots {
		if s.state == slotBackoff && s.since <= now {
			w.adopt(p)
		}
		if s.state == slotLost && w.lastHeard.Load() > s.since && !w.rebalance {
			w.opts.Logger.Printf("runs partition %d: the group still assigns it here", p)
			w.adopt(p)
		}
		if s.state == slotLive && !s.writing && s.writeAfter <= now {
			if commit := w.core.TakeCommit(p, now); commit != nil {
				s.writing = true
				producer := s.producer
				go func() {
					outcome := writeCommit(producer, w.names, commit, w.now)
					w.post(func() { w.onCommitOutcome(commit, outcome) })
				}()
			}
		}
	}
	w.settle()
}

func (w *Worker) onCommitOutcome(commit *Commit, outcome WriteOutcome) {
	kind, why := outcome.Kind, outcome.Reason
	s, ok := w.slots[commit.Partition]
	current := ok && s.lease == commit.Lease && s.state == slotLive
	if ok && s.lease == commit.Lease {
		s.writing = false
	}
	switch kind {
	case writeDone:
		w.core.CommitDone(commit)
		if current {
			s.failures = 0
		}
	case writeFenced:
		if current {
			w.opts.Logger.Printf("producer of runs partition %d was fenced: another worker adopted it; its runs here are cancelled and not reported", commit.Partition)
			w.drop(commit.Partition, "fenced")
			s.state, s.since = slotLost, w.mono() // adopted again by a later request only
		}
	case writeRefused:
		// Writing the same records again would fail forever: they are replaced
		// (Core.CommitRefused) and the rest is written again at once.
		w.core.CommitRefused(commit, outcome.Refused, why)
		w.opts.Logger.Printf("runs partition %d: the broker refused %d result records (%s); they are written again as ResultRefused failures without the job's error, or left to the shard's timed_out; raise max.message.bytes of the results topic if results are this large",
			commit.Partition, len(outcome.Refused), why)
	case writeUnknown:
		if current {
			w.opts.Logger.Printf("runs partition %d: commit outcome unknown (%s); adopting it afresh", commit.Partition, why)
			w.drop(commit.Partition, why)
			w.adopt(commit.Partition)
		}
	default:
		w.core.CommitFailed(commit)
		if !current {
			return
		}
		s.failures++
		if s.failures >= failuresToReadopt {
			w.drop(commit.Partition, why)
			w.adopt(commit.Partition)
			return
		}
		delay := commitRetry << (s.failures - 1)
		if delay > commitRetryMax {
			delay = commitRetryMax
		}
		s.writeAfter = w.now() + delay.Milliseconds()
		w.opts.Logger.Printf("commit of runs partition %d failed (%s); retrying in %s", commit.Partition, why, delay)
	}
	w.settle()
}

var errNoJobs = errors.New("no jobs registered")

// Validate checks the options.
func (o Options) Validate() error {
	if o.Registry == nil || len(o.Registry.Names()) == 0 {
		return errNoJobs
	}
	if o.Concurrency < 1 {
		return errors.New("concurrency must be at least 1")
	}
	if o.SessionTimeout < time.Second {
		return errors.New("session timeout must be at least 1 s")
	}
	return nil
}
