package kafkron

import (
	"encoding/json"
	"testing"
)

// A run naming a flow-control field this worker does not keep is never run by it: it
// fails at once, visibly, with the field's error type, and starts no job
// (docs/WORKER-PROTOCOL.md 1.6 concurrency keys, 1.8 rate limits).
func TestARunWithAnUnsupportedFieldFailsWithoutRunning(t *testing.T) {
	cases := []struct {
		name     string
		jobField string
		errType  string
	}{
		{"concurrency key", `"concurrency":{"key":"customer-42","limit":1,"strategy":"queue"}`,
			ConcurrencyUnsupportedType},
		{"rate limit", `"rate_limit":{"key":"payments","per_s":10,"burst":5}`,
			RateLimitUnsupportedType},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCore("w1", 1, func(string) bool { return true })
			c.Assign(0, 0, "", 1, -1)
			value := `{"v":1,"run_id":"r1@2026-09-21T14:13:20.000Z","schedule_id":"s1","task":null,` +
				`"scheduled_at":"2026-09-21T14:13:20.000Z","fired_at":"2026-09-21T14:13:20.000Z",` +
				`"attempt":1,"idempotency_key":"k","deadline":"2026-09-21T15:13:20.000Z",` +
				`"job":{"name":"j","args":{},` + tc.jobField + `}}`
			actions := c.Receive(Record{0, 0, []byte(value)}, t0)
			actions = append(actions, c.Fill(t0)...)
			for _, a := range actions {
				if _, ok := a.(StartJob); ok {
					t.Fatalf("the run was started: %+v", a)
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
			if got["status"] != "failed" || errInfo["type"] != tc.errType {
				t.Fatalf("result: %s", commit.Results[0].Value)
			}
		})
	}
}
