package kafkron

// BrokerFloor is actors/worker/clock.py: BrokerFloor: a lower bound of the broker's
// clock from the runs' LogAppendTime, carried on the monotonic clock
// (docs/WORKER-PROTOCOL.md §11). The worker's time is the later of it and the wall clock.
type BrokerFloor struct {
	base  int64
	known bool
}

// Observe: a record appended at brokerMs was fetched by monoMs.
func (f *BrokerFloor) Observe(brokerMs, monoMs int64) {
	if brokerMs <= 0 {
		return
	}
	base := brokerMs - monoMs
	if !f.known || base > f.base {
		f.base, f.known = base, true
	}
}

// NowMs is the worker's time.
func (f *BrokerFloor) NowMs(wallMs, monoMs int64) int64 {
	if f.known && f.base+monoMs > wallMs {
		return f.base + monoMs
	}
	return wallMs
}
