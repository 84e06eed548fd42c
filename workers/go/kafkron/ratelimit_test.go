package kafkron

import (
	"encoding/json"
	"testing"
)

// A run with a rate limit is never run by this worker (it keeps no bucket and reads no
// pauses): it fails at once, visibly, and starts no job (docs/WORKER-PROTOCOL.md 1.8).
func TestARunWithARateLimitFailsWithoutRunning(t *testing.T) {
	c := NewCore("w1", 1, func(string) bool { return true })
	c.Assign(0, 0, "", 1, -1)
	value := `{"v":1,"run_id":"r1@2026-09-21T14:13:20.000Z","schedule_id":"s1","task":null,` +
		`"scheduled_at":"2026-09-21T14:13:20.000Z","fired_at":"2026-09-21T14:13:20.000Z","attempt":1,` +
		`"idempotency_key":"k","deadline":"2026-09-21T15:13:20.000Z",` +
		`"job":{"name":"j","args":{},"rate_limit":{"key":"payments","per_s":10,"burst":5}}}`
	actions := c.Receive(Record{0, 0, []byte(value)}, t0)
	actions = append(actions, c.Fill(t0)...)
	for _, a := range actions {
		if _, ok := a.(StartJob); ok {
			t.Fatalf("a rate-limited run was started: %+v", a)
		}
	}
	commit := c.TakeCommit(0, t0)
	if commit == nil || len(commit.Results) != 1 || commit.Offset != 1 {
		t.Fatalf("no commit with its one result: %+v", commit)
	}
	var got map[string]any
	if err := json.Unmarshal(commit.Results[0].Value, &got); err != nil {
		t.Fatal(err)
	}
	errInfo := got["error"].(map[string]any)
	if got["status"] != "failed" || errInfo["type"] != RateLimitUnsupportedType {
		t.Fatalf("result: %s", commit.Results[0].Value)
	}
}
