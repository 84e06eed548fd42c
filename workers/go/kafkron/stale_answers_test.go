package kafkron

import (
	"io"
	"log"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A SyncGroup answered, then the process frozen 40 s (past the session) before the
// assignment is applied: onAssigned must not adopt (fence) partitions the group has
// since given to another member.
func TestStaleSyncGroupAnswerDoesNotAdopt(t *testing.T) {
	w := leaseTestWorker(t)
	defer w.consumer.Close()
	w.lastHeard.Store(w.mono())
	w.onRebalanceStarted()
	script, conn := groupConn(w)
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.SetVersion(5)
	syncAnswer := kmsg.NewPtrSyncGroupResponse()
	syncAnswer.SetVersion(5)
	if _, err := conn.Write(request(sync, 1)); err != nil {
		t.Fatal(err)
	}
	w.start = w.start.Add(-40 * time.Second) // frozen with the SyncGroup answer unread
	converse(t, conn, script, nil, answer(syncAnswer, 1))
	w.onAssigned([]int32{0})
	if s := w.slots[0]; s != nil && s.state == slotAdopting {
		t.Fatalf("adopted partition 0 on a SyncGroup answer whose lease ran out %d ms ago",
			w.mono()-w.lastHeard.Load()-3*w.heartbeatInterval().Milliseconds())
	}
}

// A heartbeat sent before a freeze and
// read after the turn that found the lease lost must not re-adopt (fence) the
// partitions the group gave away during the freeze.
func TestStaleHeartbeatAfterLeaseLossDoesNotReadopt(t *testing.T) {
	w := leaseTestWorker(t)
	defer w.consumer.Close()
	w.slots[0] = &slot{state: slotLive, lease: 1}
	w.lastHeard.Store(w.mono()) // s1: last answer read before the freeze
	// 2 s later a heartbeat goes out (s2), the broker answers it at once (NoError),
	// and the process is frozen 40 s before reading it.
	w.start = w.start.Add(-2 * time.Second)
	script, conn := groupConn(w)
	if _, err := conn.Write(request(heartbeatRequest(4), 1)); err != nil {
		t.Fatal(err)
	}
	w.start = w.start.Add(-40 * time.Second)
	w.tick() // first turn after the thaw: the lease is lost
	if w.slots[0].state != slotLost {
		t.Fatalf("state %d, want lost", w.slots[0].state)
	}
	converse(t, conn, script, nil, answer(heartbeatAnswer(4, 0), 1)) // the stale answer
	w.tick()
	if w.slots[0].state == slotAdopting {
		t.Fatalf("re-adopted (fencing the new owner) on a heartbeat sent before the freeze")
	}
}

// leaseTestWorker: a worker of a 10 s session and the 3-heartbeat lease rule whose
// clock began 100 s ago, with a consumer that never connects (its pause and resume
// calls are all the lease code makes of it).
func leaseTestWorker(t *testing.T) *Worker {
	w := NewWorker(Options{Namespace: "kafkron-test", WorkerID: "w", Concurrency: 1,
		SessionTimeout: 10 * time.Second, LeaseLossBeats: 3, Registry: NewRegistry(),
		Bootstrap: []string{"127.0.0.1:1"}, Logger: log.New(io.Discard, "", 0)})
	var err error
	if w.consumer, err = kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1")); err != nil {
		t.Fatal(err)
	}
	w.start = time.Now().Add(-100 * time.Second)
	return w
}

// groupConn: a connection of w's consumer to the group coordinator, read as the
// consumer's are (consumerOpts), whose answers the test writes.
func groupConn(w *Worker) (*scriptConn, net.Conn) {
	script := &scriptConn{chunk: 4096}
	return script, w.groupAnswers().watch(script)
}
