package kafkron

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// An adoption in flight when the lease runs out goes no further (WORKER-PROTOCOL
// 10.1): a worker cut from the group coordinator, reaching the transaction
// coordinator, must not start producers past its lease (each init fences the
// partition's new owner), nor go live on an adoption answered past it.

// Thawed past the lease with an adoption's answer (the producer fenced, the offsets
// read) waiting before the tick that finds the lease gone: it must not go live.
func TestAnAdoptionAnsweredPastTheLeaseDoesNotGoLive(t *testing.T) {
	w := leaseTestWorker(t)
	defer w.consumer.Close()
	w.lastHeard.Store(w.mono())
	w.slots[0] = &slot{}
	w.adopt(0) // its steps run against no broker; their answer is the one below
	lease := w.slots[0].lease
	w.start = w.start.Add(-40 * time.Second) // frozen past the session
	producer, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	w.adopted(0, lease, producer, 0, "", 0, nil)
	if s := w.slots[0]; s.state != slotLost || s.producer != nil || len(w.core.Assigned()) != 0 {
		t.Fatalf("state %d, producer kept %v, core holds %v: went live past the lease",
			s.state, s.producer != nil, w.core.Assigned())
	}
}

// A commit whose outcome is unknown, read past the lease: the partition is not
// adopted afresh (its producer's init would fence the new owner).
func TestAnUnknownCommitPastTheLeaseDoesNotAdoptAgain(t *testing.T) {
	w := leaseTestWorker(t)
	defer w.consumer.Close()
	w.lastHeard.Store(w.mono())
	w.slots[0] = &slot{state: slotLive, lease: 1, writing: true}
	w.start = w.start.Add(-40 * time.Second)
	w.onCommitOutcome(&Commit{Partition: 0, Lease: 1}, WriteOutcome{Kind: writeUnknown, Reason: "EndTxn timed out"})
	if s := w.slots[0]; s.state != slotLost {
		t.Fatalf("state %d after an unknown commit past the lease, want lost", s.state)
	}
}

// A heartbeat sent after the loss but read after the lease it renews ran out (a
// second freeze) adopts nothing; one sent after that and read in time does.
func TestAHeartbeatReadPastItsLeaseDoesNotReadopt(t *testing.T) {
	w := leaseTestWorker(t)
	defer w.consumer.Close()
	w.slots[0] = &slot{state: slotLive, lease: 1}
	w.lastHeard.Store(w.mono())
	w.start = w.start.Add(-40 * time.Second)
	w.tick()
	if w.slots[0].state != slotLost {
		t.Fatalf("state %d, want lost", w.slots[0].state)
	}
	w.start = w.start.Add(-100 * time.Millisecond)
	script, conn := groupConn(w)
	if _, err := conn.Write(request(heartbeatRequest(4), 1)); err != nil {
		t.Fatal(err)
	}
	w.start = w.start.Add(-40 * time.Second) // frozen again, the answer unread
	converse(t, conn, script, nil, answer(heartbeatAnswer(4, 0), 1))
	w.tick()
	if w.slots[0].state != slotLost {
		t.Fatalf("state %d: adopted on a heartbeat read past the lease it renews", w.slots[0].state)
	}
	w.start = w.start.Add(-100 * time.Millisecond)
	converse(t, conn, script, request(heartbeatRequest(4), 2), answer(heartbeatAnswer(4, 0), 2))
	w.tick()
	if w.slots[0].state != slotAdopting {
		t.Fatalf("state %d: a heartbeat sent after the thaw and read in time did not adopt", w.slots[0].state)
	}
}

// A worker holding no live partition, its only adoption backed off: past the lease the
// retry does not start (lost instead), whatever the backoff's due time.
func TestABackedOffAdoptionIsNotRetriedPastTheLease(t *testing.T) {
	w := leaseTestWorker(t)
	defer w.consumer.Close()
	w.lastHeard.Store(w.mono())
	w.slots[0] = &slot{state: slotBackoff, lease: 1, since: w.now() + 500}
	w.start = w.start.Add(-40 * time.Second)
	w.tick()
	if s := w.slots[0]; s.state != slotLost {
		t.Fatalf("state %d past the lease, want lost", s.state)
	}
}

// Records fetched in the turn after a freeze past the lease, before the tick that
// finds it gone: no run starts.
func TestRecordsFetchedPastTheLeaseStartNothing(t *testing.T) {
	w := leaseTestWorker(t)
	defer w.consumer.Close()
	started := make(chan struct{}, 1)
	w.opts.Registry.Register("j", func(context.Context, *RunContext) error {
		started <- struct{}{}
		return nil
	})
	w.lastHeard.Store(w.mono())
	w.slots[0] = &slot{state: slotLive, lease: 1}
	w.core.Assign(0, 0, "", 1, -1)
	w.start = w.start.Add(-40 * time.Second)
	value := `{"v":1,"run_id":"r1@2026-09-21T14:13:20.000Z","schedule_id":"s1","task":null,` +
		`"scheduled_at":"2026-09-21T14:13:20.000Z","fired_at":"2026-09-21T14:13:20.000Z","attempt":1,` +
		`"idempotency_key":"k","deadline":"2099-01-01T00:00:00.000Z","job":{"name":"j","args":{}}}`
	record := &kgo.Record{Topic: w.names.Topic("runs"), Partition: 0, Offset: 0, Value: []byte(value)}
	w.onFetches(kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: record.Topic,
		Partitions: []kgo.FetchPartition{{Partition: 0, Records: []*kgo.Record{record}}}}}}})
	if len(w.jobs) != 0 {
		t.Fatalf("started %d runs past the lease", len(w.jobs))
	}
	select {
	case <-started:
		t.Fatalf("a job ran past the lease")
	case <-time.After(50 * time.Millisecond):
	}
}
