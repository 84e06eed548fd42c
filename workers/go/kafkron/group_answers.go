package kafkron

// When the group last heard this worker (WORKER-PROTOCOL 10.1): the send time of each
// group request answered without an error code.
//
// A Heartbeat, JoinGroup or SyncGroup answer with no error proves the group had this
// member when the broker handled the request: after it was sent, possibly long before
// the answer is read (a freeze in between). An answer with an error code
// (REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID,
// NOT_COORDINATOR, ...) proves nothing: the group gives our partitions away when the
// rebalance it announces ends without us, or has already.
//
// franz-go shows none of it: its broker hooks (kgo.HookBrokerRead, HookBrokerE2E) are
// given the request's key, byte counts, durations and transport errors, never the
// response; the group's requests go through the client's internal request path
// (req.RequestWith), which nothing outside can wrap; and OnGroupManageError,
// OnPartitionsLost and OnPartitionsRevoked come after the answer, too late to stop it
// counting. What it does let us choose is the consumer's connections (kgo.Dialer). So
// the consumer's connections are read as they pass: the header of each request
// written (its key, version and correlation id: its send time is the write's), and the
// answers to Heartbeat, JoinGroup and SyncGroup, decoded with kmsg to their error code.

import (
	"context"
	"encoding/binary"
	"net"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// dialFunc is kgo.Dialer's function.
type dialFunc = func(ctx context.Context, network, host string) (net.Conn, error)

const (
	keyJoinGroup = 11
	keyHeartbeat = 12
	keySyncGroup = 14
	// An answer larger than this is not a group answer of ours (a JoinGroup answer
	// lists each member's subscription: a few hundred bytes each): it is not decoded.
	maxAnswerBytes = 16 << 20
)

// groupAnswers tells heard(key, sentMs) of every Heartbeat, JoinGroup and SyncGroup
// answered without error, sentMs on the clock nowMs, read when the request was written.
// logf is told, once per connection, when that connection's group answers stop being
// read: a lease that then runs out says why instead of blaming the network.
type groupAnswers struct {
	nowMs func() int64
	heard func(key int16, sentMs int64)
	logf  func(format string, args ...any)
}

// dialer wraps the client's own dial function (TLS included): the connections it opens
// are read as they pass, nothing in them changed.
func (g groupAnswers) dialer(inner dialFunc) dialFunc {
	return func(ctx context.Context, network, host string) (net.Conn, error) {
		conn, err := inner(ctx, network, host)
		if err != nil {
			return nil, err
		}
		watched := g.watch(conn).(*answerConn)
		watched.host = host
		return watched, nil
	}
}

func (g groupAnswers) watch(conn net.Conn) net.Conn {
	return &answerConn{Conn: conn, g: g, pending: map[int32]groupRequest{},
		written: frames{headLen: 12}, read: frames{headLen: 8}}
}

type groupRequest struct {
	key, version int16
	sentMs       int64
}

// answerConn: one connection of the consumer. franz-go writes from one goroutine and
// reads from another; each direction has its own frames, pending is shared.
type answerConn struct {
	net.Conn
	g       groupAnswers
	host    string
	mu      sync.Mutex
	pending map[int32]groupRequest // by correlation id
	written frames
	read    frames
	// the request whose answer is being read (the read goroutine's only)
	answering groupRequest
	told      atomic.Bool // giveUp has logged
}

func (c *answerConn) Write(p []byte) (int, error) {
	// Noted before the write: the answer may be read (on the other goroutine) before
	// the write returns.
	sentMs := c.g.nowMs()
	c.written.feed(p, func(head []byte, _ int) bool {
		key := int16(binary.BigEndian.Uint16(head[4:6]))
		if key == keyJoinGroup || key == keyHeartbeat || key == keySyncGroup {
			version := int16(binary.BigEndian.Uint16(head[6:8]))
			corr := int32(binary.BigEndian.Uint32(head[8:12]))
			c.mu.Lock()
			c.pending[corr] = groupRequest{key, version, sentMs}
			c.mu.Unlock()
		}
		return false
	}, nil)
	if c.written.lost {
		c.giveUp("a request of size %d cannot be", c.written.lostSize)
	}
	return c.Conn.Write(p)
}

func (c *answerConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.feed(p[:n], func(head []byte, size int) bool {
		corr := int32(binary.BigEndian.Uint32(head[4:8]))
		c.mu.Lock()
		req, ok := c.pending[corr]
		if ok {
			delete(c.pending, corr)
		}
		c.mu.Unlock()
		if ok && size > maxAnswerBytes {
			c.giveUp("the answer to request key %d v%d has %d bytes, more than the %d read",
				req.key, req.version, size, maxAnswerBytes)
			return false
		}
		c.answering = req
		return ok
	}, func(frame []byte) {
		code, ok := errorCode(c.answering, frame[4:])
		if !ok {
			c.giveUp("the answer to request key %d v%d has no error code that can be read",
				c.answering.key, c.answering.version)
		} else if code == 0 {
			c.g.heard(c.answering.key, c.answering.sentMs)
		}
	})
	if c.read.lost {
		c.giveUp("an answer of size %d cannot be", c.read.lostSize)
	}
	return n, err
}

// giveUp logs, once for the connection, why a group answer on it was not counted.
func (c *answerConn) giveUp(format string, args ...any) {
	if c.g.logf == nil || !c.told.CompareAndSwap(false, true) {
		return
	}
	c.g.logf("group answers from %s: "+format+"; such answers on this connection renew no lease "+
		"(the lease may run out while the group still has this worker)", append([]any{c.host}, args...)...)
}

// errorCode of the answer to req (its body after the correlation id); false if it
// cannot be decoded (never counted).
func errorCode(req groupRequest, body []byte) (int16, bool) {
	resp := kmsg.ResponseForKey(req.key)
	resp.SetVersion(req.version)
	if resp.IsFlexible() { // the response header's tagged fields
		r := kbin.Reader{Src: body}
		kmsg.SkipTags(&r)
		if !r.Ok() {
			return 0, false
		}
		body = r.Src
	}
	if resp.ReadFrom(body) != nil {
		return 0, false
	}
	switch r := resp.(type) {
	case *kmsg.HeartbeatResponse:
		return r.ErrorCode, true
	case *kmsg.JoinGroupResponse:
		return r.ErrorCode, true
	case *kmsg.SyncGroupResponse:
		return r.ErrorCode, true
	}
	return 0, false
}

// frames cuts one direction of a connection into Kafka's size-prefixed frames as its
// bytes pass, in pieces of any length. A frame may be shorter than a header: the raw
// SASL tokens of a broker whose SaslHandshake is v0 (Kafka before 1.0) are
// size-prefixed with no header, and its PLAIN answer is an empty token (size 0).
type frames struct {
	headLen  int      // the size and the first bytes of the body onHead is shown
	head     [12]byte // headLen bytes at most
	headN    int
	left     int // bytes of the current frame still to come
	keep     bool
	frame    []byte // a kept frame's body
	lost     bool   // a size that cannot be: the stream is not followed any further
	lostSize int
}

// feed takes the next bytes. onHead is shown the first headLen bytes of each frame at
// least that long, with the frame's size, and says whether its body is wanted; onFrame
// is given that body once whole. A shorter frame is passed over.
func (f *frames) feed(p []byte, onHead func(head []byte, size int) bool, onFrame func(body []byte)) {
	for !f.lost {
		if f.headN < f.headLen {
			if len(p) == 0 {
				return
			}
			// The size first, then as much of the header as the frame holds.
			want := 4
			if f.headN >= 4 {
				want = 4 + min(int(int32(binary.BigEndian.Uint32(f.head[:4]))), f.headLen-4)
			}
			n := copy(f.head[f.headN:want], p)
			f.headN, p = f.headN+n, p[n:]
			if f.headN < want {
				return
			}
			size := int(int32(binary.BigEndian.Uint32(f.head[:4])))
			if size < 0 { // only a negative size is a stream out of step
				f.lost, f.lostSize = true, size
				return
			}
			if f.headN == 4 && size > 0 {
				continue // the header's bytes next
			}
			f.left = size - (f.headN - 4)
			f.keep = f.headN == f.headLen && onHead(f.head[:f.headLen], size)
			if f.keep {
				f.frame = append(f.frame[:0], f.head[4:f.headLen]...)
			}
			f.headN = f.headLen // the header is done, whatever its length
		}
		n := min(f.left, len(p))
		if f.keep {
			f.frame = append(f.frame, p[:n]...)
		}
		f.left, p = f.left-n, p[n:]
		if f.left == 0 {
			if f.keep && onFrame != nil {
				onFrame(f.frame)
			}
			f.headN, f.keep = 0, false
		} else if len(p) == 0 {
			return
		}
	}
}
