package kafkron

// The conformance suite's job vocabulary (docs/WORKER-PROTOCOL.md §13), the same
// names and behaviour as tests/jobs/worker.py. Each appends "<event> <run_id>
// <attempt> <worker>" lines to $KAFKRON_TEST_MARKS.

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"
)

var marksMu sync.Mutex

func mark(event string, rc *RunContext) {
	path := os.Getenv("KAFKRON_TEST_MARKS")
	if path == "" {
		return
	}
	marksMu.Lock()
	defer marksMu.Unlock()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s %s %d %s\n", event, rc.Run.RunID, rc.Run.Attempt, rc.Worker)
}

func floatArg(args map[string]any, name string, fallback float64) float64 {
	if v, ok := args[name].(float64); ok {
		return v
	}
	return fallback
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// RegisterTestJobs adds test.noop, test.sleep, test.sleep_sync, test.fail,
// test.stoppable and test.stoppable_sync.
func RegisterTestJobs(reg *Registry) {
	reg.Register("test.noop", func(ctx context.Context, rc *RunContext) error { return nil })
	reg.Register("test.sleep", func(ctx context.Context, rc *RunContext) error {
		mark("start", rc)
		select {
		case <-time.After(seconds(floatArg(rc.Args, "seconds", 1))):
		case <-ctx.Done():
			return ctx.Err()
		}
		mark("end", rc)
		return nil
	})
	heartbeating := func(stopMark bool, details func(left time.Duration, beats int) any) JobFunc {
		return func(ctx context.Context, rc *RunContext) error {
			mark("start", rc)
			until := time.Now().Add(seconds(floatArg(rc.Args, "seconds", map[bool]float64{true: 60, false: 1}[stopMark])))
			beats := 0
			for time.Now().Before(until) {
				beats++
				if err := rc.Heartbeat(details(time.Until(until), beats)); err != nil {
					if stopMark {
						mark("stopped", rc)
					}
					return err
				}
				time.Sleep(50 * time.Millisecond)
			}
			mark("end", rc)
			return nil
		}
	}
	reg.Register("test.sleep_sync", heartbeating(false, func(left time.Duration, _ int) any {
		return map[string]any{"left_s": left.Seconds()}
	}))
	reg.Register("test.stoppable_sync", heartbeating(true, func(_ time.Duration, beats int) any {
		return map[string]any{"beats": beats}
	}))
	reg.Register("test.fail", func(ctx context.Context, rc *RunContext) error {
		mark("start", rc)
		message, ok := rc.Args["message"].(string)
		if !ok {
			message = "boom"
		}
		return &JobError{Type: "ValueError", Message: fmt.Sprintf("%s on attempt %d", message, rc.Run.Attempt)}
	})
	reg.Register("test.stoppable", func(ctx context.Context, rc *RunContext) error {
		mark("start", rc)
		select {
		case <-time.After(seconds(floatArg(rc.Args, "seconds", 60))):
		case <-ctx.Done():
			mark("stopped", rc)
			return ctx.Err()
		}
		mark("end", rc)
		return nil
	})
}
