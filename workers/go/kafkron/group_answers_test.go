package kafkron

import (
	"context"
	"io"
	"net"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// scriptConn: a connection whose reads serve the answers queued, in pieces of at most
// chunk bytes (franz-go's reads may end anywhere in a frame).
type scriptConn struct {
	net.Conn
	answers []byte
	chunk   int
}

func (c *scriptConn) Write(p []byte) (int, error) { return len(p), nil }

func (c *scriptConn) Read(p []byte) (int, error) {
	if len(c.answers) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), c.chunk)], c.answers)
	c.answers = c.answers[n:]
	return n, nil
}

// request: the bytes franz-go writes for req (its own formatter).
func request(req kmsg.Request, corr int32) []byte {
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("kafkron-worker-w")).AppendRequest(nil, req, corr)
}

// answer: the bytes a broker writes for resp; a flexible header carries one tagged
// field (brokers send none today; a reader must skip them).
func answer(resp kmsg.Response, corr int32) []byte {
	body := kbin.AppendInt32(nil, corr)
	if resp.IsFlexible() {
		body = append(body, 1, 0, 2, 0xAB, 0xCD) // one tag: number 0, 2 bytes
	}
	body = resp.AppendTo(body)
	return append(kbin.AppendInt32(nil, int32(len(body))), body...)
}

func heartbeatAnswer(version, code int16) kmsg.Response {
	resp := kmsg.NewPtrHeartbeatResponse()
	resp.SetVersion(version)
	resp.ErrorCode = code
	return resp
}

func heartbeatRequest(version int16) kmsg.Request {
	req := kmsg.NewPtrHeartbeatRequest()
	req.SetVersion(version)
	req.Group, req.MemberID, req.Generation = "kafkron-test-workers", "m", 1
	return req
}

// converse writes req on conn, queues the answers, and reads them all.
func converse(t *testing.T, conn net.Conn, script *scriptConn, req []byte, answers ...[]byte) {
	t.Helper()
	if _, err := conn.Write(req); err != nil {
		t.Fatal(err)
	}
	for _, a := range answers {
		script.answers = append(script.answers, a...)
	}
	buf := make([]byte, 4096)
	for len(script.answers) > 0 {
		if _, err := conn.Read(buf); err != nil {
			t.Fatal(err)
		}
	}
}

type heardLog struct {
	keys  []int16
	sents []int64
}

func (h *heardLog) heard(key int16, sentMs int64) {
	h.keys, h.sents = append(h.keys, key), append(h.sents, sentMs)
}

// Only a group answer without an error code is heard (WORKER-PROTOCOL 10.1): a
// Heartbeat answered REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION,
// FENCED_INSTANCE_ID or NOT_COORDINATOR renews nothing, at every Heartbeat version,
// whatever pieces the answer is read in.
func TestOnlyAnAnswerWithoutErrorIsHeard(t *testing.T) {
	for _, version := range []int16{0, 3, 4} {
		for _, chunk := range []int{1, 7, 4096} {
			for _, code := range []int16{27, 25, 22, 82, 16} {
				var log heardLog
				script := &scriptConn{chunk: chunk}
				conn := groupAnswers{nowMs: func() int64 { return 1000 }, heard: log.heard}.watch(script)
				converse(t, conn, script, request(heartbeatRequest(version), 7), answer(heartbeatAnswer(version, code), 7))
				if len(log.keys) != 0 {
					t.Fatalf("v%d, chunk %d: a heartbeat answered with error %d was heard", version, chunk, code)
				}
			}
			var log heardLog
			script := &scriptConn{chunk: chunk}
			conn := groupAnswers{nowMs: func() int64 { return 1000 }, heard: log.heard}.watch(script)
			converse(t, conn, script, request(heartbeatRequest(version), 8), answer(heartbeatAnswer(version, 0), 8))
			if len(log.keys) != 1 || log.keys[0] != keyHeartbeat || log.sents[0] != 1000 {
				t.Fatalf("v%d, chunk %d: a heartbeat answered without error: heard %v at %v", version, chunk, log.keys, log.sents)
			}
		}
	}
}

// A group answer counts from when its request was written: a process frozen 40 s
// while it waited for the answer does not count the freeze as heard.
func TestAnAnswerReadAfterAFreezeCountsFromItsSend(t *testing.T) {
	var clock atomic.Int64
	clock.Store(100_000)
	var log heardLog
	script := &scriptConn{chunk: 4096}
	conn := groupAnswers{nowMs: clock.Load, heard: log.heard}.watch(script)
	if _, err := conn.Write(request(heartbeatRequest(4), 1)); err != nil {
		t.Fatal(err)
	}
	clock.Add(40_000)
	converse(t, conn, script, nil, answer(heartbeatAnswer(4, 0), 1))
	if len(log.sents) != 1 || log.sents[0] != 100_000 {
		t.Fatalf("heard at %v, want [100000] (the write)", log.sents)
	}
}

// SyncGroup and JoinGroup answers are told with their key; other answers on the same
// connection (a fetch, a metadata answer) are passed over, however long, and an
// answer no group request of ours asked for is not heard.
func TestGroupAnswersAmongOthers(t *testing.T) {
	var log heardLog
	script := &scriptConn{chunk: 3}
	conn := groupAnswers{nowMs: func() int64 { return 5 }, heard: log.heard}.watch(script)
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.SetVersion(5)
	syncAnswer := kmsg.NewPtrSyncGroupResponse()
	syncAnswer.SetVersion(5)
	syncAnswer.MemberAssignment = make([]byte, 300)
	join := kmsg.NewPtrJoinGroupRequest()
	join.SetVersion(9)
	joinAnswer := kmsg.NewPtrJoinGroupResponse()
	joinAnswer.SetVersion(9)
	fetch := kmsg.NewPtrFetchRequest()
	fetch.SetVersion(12)
	fetchAnswer := kmsg.NewPtrFetchResponse()
	fetchAnswer.SetVersion(12)
	fetchAnswer.Topics = []kmsg.FetchResponseTopic{{Topic: "runs", Partitions: []kmsg.FetchResponseTopicPartition{
		{Partition: 0, ErrorCode: 0, RecordBatches: make([]byte, 100_000)}}}}
	unasked := heartbeatAnswer(4, 0)
	converse(t, conn, script, append(append(request(sync, 1), request(fetch, 2)...), request(join, 3)...),
		answer(syncAnswer, 1), answer(fetchAnswer, 2), answer(unasked, 99), answer(joinAnswer, 3))
	if len(log.keys) != 2 || log.keys[0] != keySyncGroup || log.keys[1] != keyJoinGroup {
		t.Fatalf("heard %v, want [14 11]", log.keys)
	}
}

// The dialer wraps the client's own dial function and what it returns.
func TestGroupAnswersDialerWrapsTheDial(t *testing.T) {
	script := &scriptConn{chunk: 4096}
	g := groupAnswers{nowMs: func() int64 { return 0 }, heard: func(int16, int64) {}}
	conn, err := g.dialer(func(context.Context, string, string) (net.Conn, error) { return script, nil })(context.Background(), "tcp", "x:9092")
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := conn.(*answerConn); !ok || c.Conn != script {
		t.Fatalf("dialed %T, want the wrapped connection", conn)
	}
}
