package kafkron

import "testing"

// rawToken: a SASL token as franz-go sends it to a broker whose SaslHandshake is v0
// (Kafka before 1.0, or a server that speaks only that): size-prefixed, no request
// header. The broker answers the same way, a PLAIN success with an empty token.
func rawToken(token string) []byte {
	return append([]byte{0, 0, 0, byte(len(token))}, token...)
}

// After the raw SASL PLAIN exchange (an empty answer token: 4 zero bytes) the
// connection is still followed: a heartbeat answered without error is heard.
func TestAnswersAfterARawSaslExchangeAreHeard(t *testing.T) {
	for _, chunk := range []int{1, 3, 4096} {
		var log heardLog
		script := &scriptConn{chunk: chunk}
		conn := groupAnswers{nowMs: func() int64 { return 1 }, heard: log.heard}.watch(script)
		converse(t, conn, script, rawToken("\x00kafkron-worker\x00a-long-password"), []byte{0, 0, 0, 0})
		converse(t, conn, script, request(heartbeatRequest(2), 2), answer(heartbeatAnswer(2, 0), 2))
		if len(log.keys) != 1 || log.keys[0] != keyHeartbeat {
			t.Fatalf("chunk %d: a heartbeat answered without error after the raw SASL exchange: heard %v", chunk, log.keys)
		}
	}
}

// A raw token shorter than a request header (PLAIN with a one-letter user and
// password: 4 bytes) is passed over on the write side, and so is a short answer token
// (SCRAM's answers are never this short, a server's may be): the next heartbeat is
// still matched to its answer.
func TestRawTokensShorterThanAHeaderArePassedOver(t *testing.T) {
	for _, chunk := range []int{1, 5, 4096} {
		var log heardLog
		script := &scriptConn{chunk: chunk}
		conn := groupAnswers{nowMs: func() int64 { return 1 }, heard: log.heard}.watch(script)
		converse(t, conn, script, rawToken("\x00u\x00p"), rawToken("ok"))
		converse(t, conn, script, request(heartbeatRequest(4), 0), answer(heartbeatAnswer(4, 0), 0))
		if len(log.keys) != 1 {
			t.Fatalf("chunk %d: a heartbeat answered without error after short raw tokens: heard %v", chunk, log.keys)
		}
	}
}
