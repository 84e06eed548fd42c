package kafkron

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A fetch answer (8 MiB, read in 64 KiB pieces) passes through the reader with no
// allocation and is never kept: only group answers are copied.
func TestAFetchAnswerPassesThroughWithoutCopies(t *testing.T) {
	fetchAnswer := kmsg.NewPtrFetchResponse()
	fetchAnswer.SetVersion(12)
	fetchAnswer.Topics = []kmsg.FetchResponseTopic{{Topic: "runs", Partitions: []kmsg.FetchResponseTopicPartition{
		{Partition: 0, RecordBatches: make([]byte, 8<<20)}}}}
	frame := answer(fetchAnswer, 2)
	g := groupAnswers{nowMs: func() int64 { return 0 }, heard: func(int16, int64) {}}
	script := &scriptConn{chunk: 64 << 10}
	conn := g.watch(script).(*answerConn)
	conn.pending[1] = groupRequest{key: keyHeartbeat, version: 4} // a heartbeat in flight
	buf := make([]byte, 64<<10)
	allocs := testing.AllocsPerRun(5, func() {
		script.answers = frame
		for len(script.answers) > 0 {
			if _, err := conn.Read(buf); err != nil {
				t.Fatal(err)
			}
		}
	})
	if allocs != 0 || cap(conn.read.frame) != 0 {
		t.Fatalf("allocs per 8 MiB fetch answer: %v, kept frame capacity %d; want 0 and 0", allocs, cap(conn.read.frame))
	}
}
