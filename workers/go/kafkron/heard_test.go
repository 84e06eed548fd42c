package kafkron

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A group answer counts from when its request was sent: a process frozen 40 s while
// it waited for the answer does not count the freeze as heard (WORKER-PROTOCOL 10.1).
func TestAnAnswerReadAfterAFreezeCountsFromItsSend(t *testing.T) {
	e2e := kgo.BrokerE2E{TimeToWrite: time.Millisecond, ReadWait: 40 * time.Second,
		TimeToRead: time.Millisecond}
	if got := sentMs(100_000, e2e); got != 100_000-40_002 {
		t.Fatalf("sent at %d, want %d", got, 100_000-40_002)
	}
}

// Answers read out of the order of their requests never move the instant back.
func TestStoreLaterKeepsTheLaterInstant(t *testing.T) {
	var v atomic.Int64
	storeLater(&v, 50)
	storeLater(&v, 20)
	if v.Load() != 50 {
		t.Fatalf("kept %d, want 50", v.Load())
	}
	storeLater(&v, 70)
	if v.Load() != 70 {
		t.Fatalf("kept %d, want 70", v.Load())
	}
}
