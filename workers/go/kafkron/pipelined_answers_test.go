package kafkron

import (
	"encoding/binary"
	"io"
	"math/rand"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Pipelined requests on one TCP connection, written and read on separate goroutines
// (as franz-go does), the broker answering in random pieces with fetch answers in
// between: exactly the heartbeats answered without error are heard (go test -race).
func TestPipelinedAnswersReadWhileWrittenAreHeardExactly(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const n = 2000
	codes := make([]int16, n)
	want := 0
	for i := range codes {
		if i%3 == 0 {
			codes[i] = 27
		} else {
			want++
		}
	}
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		var out []byte
		size := make([]byte, 4)
		for i := 0; i < 2*n; i++ {
			if _, err := io.ReadFull(c, size); err != nil {
				return
			}
			body := make([]byte, binary.BigEndian.Uint32(size))
			io.ReadFull(c, body)
			key, corr := int16(binary.BigEndian.Uint16(body[0:2])), int32(binary.BigEndian.Uint32(body[4:8]))
			if key == keyHeartbeat {
				out = append(out, answer(heartbeatAnswer(4, codes[corr/2]), corr)...)
			} else {
				f := kmsg.NewPtrFetchResponse()
				f.SetVersion(12)
				f.Topics = []kmsg.FetchResponseTopic{{Topic: "runs", Partitions: []kmsg.FetchResponseTopicPartition{{RecordBatches: make([]byte, rand.Intn(50000))}}}}
				out = append(out, answer(f, corr)...)
			}
			for len(out) > 0 && rand.Intn(3) == 0 {
				k := min(len(out), 1+rand.Intn(9000))
				c.Write(out[:k])
				out = out[k:]
			}
		}
		c.Write(out)
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	var heard atomic.Int64
	conn := groupAnswers{nowMs: func() int64 { return 1 }, heard: func(int16, int64) { heard.Add(1) }}.watch(raw)
	defer conn.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the write goroutine
		defer wg.Done()
		fetch := kmsg.NewPtrFetchRequest()
		fetch.SetVersion(12)
		for i := 0; i < n; i++ {
			conn.Write(request(heartbeatRequest(4), int32(2*i)))
			conn.Write(request(fetch, int32(2*i+1)))
		}
	}()
	// the read goroutine: reads until every answer is in
	total := 0
	buf := make([]byte, 4096)
	for {
		k, err := conn.Read(buf[:1+rand.Intn(len(buf)-1)])
		total += k
		if err != nil {
			break
		}
		if heard.Load() == int64(want) && conn.(*answerConn).read.headN == 0 {
			ac := conn.(*answerConn)
			ac.mu.Lock()
			done := len(ac.pending) == 0
			ac.mu.Unlock()
			if done {
				break
			}
		}
	}
	wg.Wait()
	if heard.Load() != int64(want) {
		t.Fatalf("heard %d, want %d", heard.Load(), want)
	}
}
