package kafkron

// The lease rule (WORKER-PROTOCOL 10.1): when this worker may still hold partitions
// without having heard the group coordinator.

// never: the lease rule off.
const never = int64(1) << 62

// leaseExpires: the last instant (monotonic ms) the lease holds. LeaseLossBeats
// heartbeat intervals after the last answer heard; during a rebalance we joined (no
// heartbeats are sent) at least its hold; after an assignment at least the
// assignment's hold.
func (w *Worker) leaseExpires() int64 {
	if w.opts.LeaseLossBeats <= 0 {
		return never
	}
	expires := w.lastHeard.Load() + int64(w.opts.LeaseLossBeats)*w.heartbeatInterval().Milliseconds()
	if w.rebalance && w.holdUntil > expires {
		expires = w.holdUntil
	}
	return max(expires, w.syncHold)
}

func (w *Worker) leaseHolds(mono int64) bool { return mono <= w.leaseExpires() }

// syncHoldMs: how long after a SyncGroup request was sent its assignment holds the
// lease: the session less a heartbeat interval. The coordinator restarted this
// member's session when it answered, after the send, so the group cannot give our
// partitions away before a session from the send; the heartbeat's margin is the one
// the lease rule keeps below the session too. A follower's SyncGroup is answered only
// once the leader's arrives, at times later than the lease rule's heartbeats: renewed
// from the send by those alone, a healthy member lost its partitions at the assignment.
func (w *Worker) syncHoldMs() int64 {
	if w.opts.LeaseLossBeats <= 0 {
		return never
	}
	return w.opts.SessionTimeout.Milliseconds() - w.heartbeatInterval().Milliseconds()
}

// checkLease applies the rule: past the lease, every partition is dropped (its jobs
// cancelled, its results dropped) and counted lost from now.
func (w *Worker) checkLease() {
	mono := w.mono()
	if w.leaseHolds(mono) {
		return
	}
	var lost []int32
	for p, s := range w.slots {
		if s.state != slotLost {
			lost = append(lost, p)
			w.drop(p, "lease lost")
			// Lost as of now, not of the last answer: only a request sent after this
			// (a heartbeat answered) adopts it again, never one in flight across a freeze.
			s.state, s.since, s.writing = slotLost, mono, false
		}
	}
	if len(lost) > 0 {
		w.opts.Logger.Printf("worker %s: no heartbeat reached the group coordinator for %d ms; cancelling the runs of partitions %v",
			w.opts.WorkerID, mono-w.lastHeard.Load(), lost)
	}
}
