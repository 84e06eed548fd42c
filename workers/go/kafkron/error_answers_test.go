package kafkron

import (
	"testing"
	"time"
)

// Error codes a group answer may carry: those that say this member is not (or soon
// not) in the group's current generation, and those of a coordinator moving or
// loading, which prove no membership either (a move longer than the lease drops every
// partition; the next answer without error adopts them again).
var groupErrors = map[string]int16{"REBALANCE_IN_PROGRESS": 27, "UNKNOWN_MEMBER_ID": 25,
	"ILLEGAL_GENERATION": 22, "FENCED_INSTANCE_ID": 82, "NOT_COORDINATOR": 16,
	"COORDINATOR_LOAD_IN_PROGRESS": 14, "COORDINATOR_NOT_AVAILABLE": 15}

// A heartbeat answered with an error renews nothing (WORKER-PROTOCOL 10.1): 5 s after
// the last answer heard (the lease is 3 intervals of 2 s), a heartbeat answered
// REBALANCE_IN_PROGRESS or UNKNOWN_MEMBER_ID leaves the lease to run out 1 s later;
// one answered without error renews it.
func TestAnErrorAnswerDoesNotRenewTheLease(t *testing.T) {
	for name, code := range groupErrors {
		if live := liveAfterHeartbeat(t, code); live {
			t.Errorf("a heartbeat answered %s renewed the lease", name)
		}
	}
	if live := liveAfterHeartbeat(t, 0); !live {
		t.Errorf("a heartbeat answered without error did not renew the lease")
	}
}

func liveAfterHeartbeat(t *testing.T, code int16) bool {
	w := leaseTestWorker(t)
	defer w.consumer.Close()
	w.slots[0] = &slot{state: slotLive, lease: 1}
	w.lastHeard.Store(w.mono())
	w.start = w.start.Add(-5 * time.Second)
	script, conn := groupConn(w)
	converse(t, conn, script, request(heartbeatRequest(4), 1), answer(heartbeatAnswer(4, code), 1))
	w.start = w.start.Add(-2 * time.Second)
	w.tick()
	return w.slots[0].state == slotLive
}

// A worker thawed after its session ended, whose lease is lost, must not adopt its
// lost partitions again (fencing their new owners) on a heartbeat sent after the loss
// but answered UNKNOWN_MEMBER_ID (or REBALANCE_IN_PROGRESS...); a heartbeat answered
// without error, sent after the loss, does adopt them.
func TestAnErrorAnswerAfterLeaseLossDoesNotReadopt(t *testing.T) {
	for name, code := range groupErrors {
		if adoptedAfterHeartbeat(t, code) {
			t.Errorf("re-adopted a lost partition on a heartbeat answered %s", name)
		}
	}
	if !adoptedAfterHeartbeat(t, 0) {
		t.Errorf("a heartbeat answered without error after the loss did not adopt the partition")
	}
}

func adoptedAfterHeartbeat(t *testing.T, code int16) bool {
	w := leaseTestWorker(t)
	defer w.consumer.Close()
	w.slots[0] = &slot{state: slotLive, lease: 1}
	w.lastHeard.Store(w.mono())
	w.start = w.start.Add(-40 * time.Second) // frozen past the session
	w.tick()
	if w.slots[0].state != slotLost {
		t.Fatalf("state %d, want lost", w.slots[0].state)
	}
	w.start = w.start.Add(-100 * time.Millisecond)
	script, conn := groupConn(w)
	converse(t, conn, script, request(heartbeatRequest(4), 1), answer(heartbeatAnswer(4, code), 1))
	w.start = w.start.Add(-100 * time.Millisecond)
	w.tick()
	return w.slots[0].state == slotAdopting
}
