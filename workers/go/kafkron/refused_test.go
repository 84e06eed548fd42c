package kafkron

import (
	"encoding/json"
	"strings"
	"testing"
)

const t0 = int64(1_790_000_000_000)

// finishedCommit: one run delivered at offset 0 of partition 0, failed with message,
// and the commit that carries its result.
func finishedCommit(t *testing.T, c *Core, message string) *Commit {
	t.Helper()
	c.Assign(0, 0, "", 1, -1)
	value := `{"v":1,"run_id":"r1@2026-09-21T14:13:20.000Z","schedule_id":"s1","task":null,` +
		`"scheduled_at":"2026-09-21T14:13:20.000Z","fired_at":"2026-09-21T14:13:20.000Z","attempt":2,` +
		`"idempotency_key":"k","deadline":"2026-09-21T15:13:20.000Z","job":{"name":"j","args":{}}}`
	c.Receive(Record{0, 0, []byte(value)}, t0)
	var key RunKey
	for _, a := range c.Fill(t0) {
		if s, ok := a.(StartJob); ok {
			key = s.Key
		}
	}
	c.JobExited(key, Outcome{Status: StatusFailed, Error: &ErrorInfo{Type: "ValueError", Message: message}}, t0+10)
	commit := c.TakeCommit(0, t0+10)
	if commit == nil || len(commit.Results) != 1 {
		t.Fatalf("no commit with one result: %+v", commit)
	}
	return commit
}

func TestARefusedResultIsReplacedBySmallFailureThenLeftToTheShard(t *testing.T) {
	c := NewCore("w1", 1, func(string) bool { return true })
	commit := finishedCommit(t, c, strings.Repeat("x", 1500))
	c.CommitRefused(commit, []int{0}, "MESSAGE_TOO_LARGE")
	again := c.TakeCommit(0, t0+20)
	if again == nil || len(again.Results) != 1 {
		t.Fatalf("the replacement is not written: %+v", again)
	}
	var got map[string]any
	if err := json.Unmarshal(again.Results[0].Value, &got); err != nil {
		t.Fatal(err)
	}
	errInfo := got["error"].(map[string]any)
	if got["status"] != "failed" || errInfo["type"] != ResultRefusedType || got["attempt"] != 2.0 {
		t.Fatalf("replacement: %s", again.Results[0].Value)
	}
	if got["started_at"] != nil || got["finished_at"] != nil || strings.Contains(errInfo["message"].(string), "xxx") {
		t.Fatalf("replacement keeps the job's times or error: %s", again.Results[0].Value)
	}
	if string(again.Results[0].Key) != "s1" || again.Offset != 1 {
		t.Fatalf("key %q offset %d", again.Results[0].Key, again.Offset)
	}
	// The replacement refused too: dropped, left to the shard; nothing more to write.
	c.CommitRefused(again, []int{0}, "MESSAGE_TOO_LARGE")
	if last := c.TakeCommit(0, t0+30); last != nil {
		t.Fatalf("a result was written after the replacement was refused: %+v", last)
	}
	if c.Counts["left_to_shard"] != 1 || c.Counts["refused"] != 2 {
		t.Fatalf("counts %v", c.Counts)
	}
}

func TestAResultNotRefusedIsWrittenAgainAsItWas(t *testing.T) {
	c := NewCore("w1", 1, func(string) bool { return true })
	commit := finishedCommit(t, c, "small")
	c.CommitRefused(commit, nil, "MESSAGE_TOO_LARGE")
	again := c.TakeCommit(0, t0+20)
	if again == nil || string(again.Results[0].Value) != string(commit.Results[0].Value) {
		t.Fatalf("not written again as it was: %+v", again)
	}
}
