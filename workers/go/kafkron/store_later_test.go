package kafkron

import (
	"sync"
	"sync/atomic"
	"testing"
)

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

// Answers of several connections stored at once: the latest instant wins.
func TestStoreLaterFromManyGoroutinesKeepsTheLatest(t *testing.T) {
	var v atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				storeLater(&v, int64(i*8+g))
			}
		}()
	}
	wg.Wait()
	if v.Load() != 999*8+7 {
		t.Fatalf("kept %d, want %d", v.Load(), 999*8+7)
	}
}
