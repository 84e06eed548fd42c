package kafkron

import (
	"bytes"
	"fmt"
	"log"
	"strings"
	"testing"
)

// logLines collects what a groupAnswers logs.
type logLines []string

func (l *logLines) logf(format string, args ...any) {
	*l = append(*l, fmt.Sprintf(format, args...))
}

// A connection whose group answers stop being read says so once, with why: an answer
// of a size that cannot be (the stream is no longer followed), a group answer whose
// error code cannot be read, or one larger than maxAnswerBytes.
func TestAnAnswerNotReadIsLoggedOncePerConnection(t *testing.T) {
	cases := []struct {
		name, want string
		answer     []byte
	}{
		{"negative size", "an answer of size -1 cannot be", []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 3}},
		// a frame of the correlation id alone
		{"no error code", "the answer to request key 12 v0 has no error code", []byte{0, 0, 0, 4, 0, 0, 0, 3}},
		{"too large", fmt.Sprintf("the answer to request key 12 v0 has %d bytes", maxAnswerBytes+1),
			append(append([]byte{}, 0x01, 0, 0, 1), 0, 0, 0, 3)},
	}
	for _, c := range cases {
		var log heardLog
		var lines logLines
		script := &scriptConn{chunk: 3}
		conn := groupAnswers{nowMs: func() int64 { return 1 }, heard: log.heard, logf: lines.logf}.watch(script)
		converse(t, conn, script, request(heartbeatRequest(0), 3), c.answer)
		if len(lines) != 1 || !strings.Contains(lines[0], c.want) || len(log.keys) != 0 {
			t.Fatalf("%s: logged %q, heard %v; want one line with %q", c.name, lines, log.keys, c.want)
		}
		if c.name == "no error code" { // the stream is still followed: a second one is not logged again
			converse(t, conn, script, request(heartbeatRequest(0), 4), append([]byte{0, 0, 0, 4}, 0, 0, 0, 4))
			if len(lines) != 1 {
				t.Fatalf("%s: logged %q; want one line per connection", c.name, lines)
			}
		}
	}
}

// The worker's reader logs through the worker's Logger, naming the worker.
func TestTheWorkerLogsWhyAnswersAreNotRead(t *testing.T) {
	var out bytes.Buffer
	w := NewWorker(Options{WorkerID: "w-7", Logger: log.New(&out, "", 0)})
	script := &scriptConn{chunk: 4096}
	conn := w.groupAnswers().watch(script)
	converse(t, conn, script, request(heartbeatRequest(0), 3), []byte{0x80, 0, 0, 0})
	if !strings.Contains(out.String(), "worker w-7: group answers from") ||
		!strings.Contains(out.String(), "cannot be") {
		t.Fatalf("logged %q", out.String())
	}
}
