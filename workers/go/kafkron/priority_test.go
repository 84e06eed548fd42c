package kafkron

import (
	"testing"
)

// A run of priority 1-4 reaches the normal lane ({ns}.runs) with job.priority set: this
// worker serves the normal lane only and ignores the priority, running such runs in
// offset order like any other (docs/WORKER-PROTOCOL.md 1.7). It never reads a high
// lane ({ns}.runs.Q.hi), so runs of priority 5-9 never reach it.
func TestARunWithAPriorityRunsInOffsetOrder(t *testing.T) {
	c := NewCore("w1", 1, func(string) bool { return true })
	c.Assign(0, 0, "", 1, -1)
	run := func(id string, priority string) []byte {
		return []byte(`{"v":1,"run_id":"` + id + `@2026-09-21T14:13:20.000Z","schedule_id":"` + id +
			`","task":null,"scheduled_at":"2026-09-21T14:13:20.000Z","fired_at":"2026-09-21T14:13:20.000Z",` +
			`"attempt":1,"idempotency_key":"k","deadline":"2026-09-21T15:13:20.000Z",` +
			`"job":{"name":"j","args":{},"priority":` + priority + `}}`)
	}
	actions := c.Receive(Record{0, 0, run("low", "0")}, t0)
	actions = append(actions, c.Receive(Record{0, 1, run("urgent", "4")}, t0)...)
	actions = append(actions, c.Fill(t0)...)
	var started []string
	for _, a := range actions {
		if s, ok := a.(StartJob); ok {
			started = append(started, s.Run.ScheduleID)
		}
	}
	if len(started) != 1 || started[0] != "low" {
		t.Fatalf("started %v, want [low] (offset order, one slot)", started)
	}
}
