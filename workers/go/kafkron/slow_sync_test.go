package kafkron

import (
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A healthy follower whose SyncGroup the broker held 7 s for a slow leader (longer
// than the lease rule's 6 s): the assignment holds the lease until the SyncGroup's
// send plus the session less a heartbeat (8 s), as the coordinator restarted the
// member's session when it answered (WORKER-PROTOCOL 10.1). It keeps its partition,
// adopts the new one, and loses the lease only once that hold has run out.
func TestLateSyncGroupAnswerKeepsThePartitions(t *testing.T) {
	w := leaseTestWorker(t)
	defer w.consumer.Close()
	w.slots[0] = &slot{state: slotLive, lease: 1}
	w.lastHeard.Store(w.mono()) // heartbeat heard at t
	w.onRebalanceStarted()
	w.start = w.start.Add(-1500 * time.Millisecond) // t + 1.5 s: the SyncGroup goes out
	script, conn := syncGroupSent(t, w)
	w.start = w.start.Add(-7 * time.Second) // answered 7 s later
	converse(t, conn, script, nil, answer(syncGroupAnswer(), 1))
	w.onAssigned([]int32{0, 1})
	w.tick()
	if s := w.slots[0]; s == nil || s.state != slotLive {
		t.Fatalf("dropped partition 0 at an assignment read 7 s after its SyncGroup's send")
	}
	if s := w.slots[1]; s == nil || s.state != slotAdopting {
		t.Fatalf("did not adopt partition 1 at an assignment read 7 s after its SyncGroup's send")
	}
	w.start = w.start.Add(-900 * time.Millisecond) // t + 9.4 s: the hold's last 100 ms
	w.tick()
	if w.slots[0].state != slotLive {
		t.Fatalf("lost the lease before the SyncGroup's send plus the session less a heartbeat")
	}
	w.start = w.start.Add(-200 * time.Millisecond) // t + 9.6 s: past it, nothing heard since
	w.tick()
	if w.slots[0].state != slotLost || w.slots[1].state != slotLost {
		t.Fatalf("states %d and %d past the assignment's hold, want lost", w.slots[0].state, w.slots[1].state)
	}
}

// Read past that hold (a freeze between the SyncGroup's send and its answer's read),
// the assignment adopts nothing, and the kept partition goes at the next turn.
func TestSyncGroupAnswerReadPastItsHoldAdoptsNothing(t *testing.T) {
	w := leaseTestWorker(t)
	defer w.consumer.Close()
	w.slots[0] = &slot{state: slotLive, lease: 1}
	w.lastHeard.Store(w.mono())
	w.onRebalanceStarted()
	w.start = w.start.Add(-1500 * time.Millisecond)
	script, conn := syncGroupSent(t, w)
	w.start = w.start.Add(-8100 * time.Millisecond) // 100 ms past the hold
	converse(t, conn, script, nil, answer(syncGroupAnswer(), 1))
	w.onAssigned([]int32{0, 1})
	if s := w.slots[1]; s == nil || s.state != slotLost {
		t.Fatalf("partition 1 not left lost by an assignment read past its hold")
	}
	w.tick()
	if w.slots[0].state != slotLost {
		t.Fatalf("kept partition 0 past the assignment's hold")
	}
}

// syncGroupSent: a SyncGroup request written on a connection of w's consumer.
func syncGroupSent(t *testing.T, w *Worker) (*scriptConn, net.Conn) {
	script, conn := groupConn(w)
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.SetVersion(5)
	if _, err := conn.Write(request(sync, 1)); err != nil {
		t.Fatal(err)
	}
	return script, conn
}

func syncGroupAnswer() kmsg.Response {
	resp := kmsg.NewPtrSyncGroupResponse()
	resp.SetVersion(5)
	return resp
}
