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
type groupAnswers struct {
	nowMs func() int64
	heard func(key int16, sentMs int64)
}

// dialer wraps the client's own dial function (TLS included): the connections it opens
// are read as they pass, nothing in them changed.
func (g groupAnswers) dialer(inner dialFunc) dialFunc {
	return func(ctx context.Context, network, host string) (net.Conn, error) {
		conn, err := inner(ctx, network, host)
		if err != nil {
			return nil, err
		}
		return g.watch(conn), nil
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
	mu      sync.Mutex
	pending map[int32]groupRequest // by correlation id
	written frames
	read    frames
	// the request whose answer is being read (the read goroutine's only)
	answering groupRequest
}

func (c *answerConn) Write(p []byte) (int, error) {
	// Noted before the write: the answer may be read (on the other goroutine) before
	// the write returns.
	sentMs := c.g.nowMs()
	c.written.feed(p, func(head []byte) bool {
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
	return c.Conn.Write(p)
}

func (c *answerConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.feed(p[:n], func(head []byte) bool {
		corr := int32(binary.BigEndian.Uint32(head[4:8]))
		c.mu.Lock()
		defer c.mu.Unlock()
		var ok bool
		if c.answering, ok = c.pending[corr]; ok {
			delete(c.pending, corr)
		}
		return ok
	}, func(frame []byte) {
		if errorCode(c.answering, frame[4:]) == 0 {
			c.g.heard(c.answering.key, c.answering.sentMs)
		}
	})
	return n, err
}

// errorCode of the answer to req (its body after the correlation id); -1 if it cannot
// be decoded (never counted).
func errorCode(req groupRequest, body []byte) int16 {
	resp := kmsg.ResponseForKey(req.key)
	resp.SetVersion(req.version)
	if resp.IsFlexible() { // the response header's tagged fields
		r := kbin.Reader{Src: body}
		kmsg.SkipTags(&r)
		if !r.Ok() {
			return -1
		}
		body = r.Src
	}
	if resp.ReadFrom(body) != nil {
		return -1
	}
	switch r := resp.(type) {
	case *kmsg.HeartbeatResponse:
		return r.ErrorCode
	case *kmsg.JoinGroupResponse:
		return r.ErrorCode
	case *kmsg.SyncGroupResponse:
		return r.ErrorCode
	}
	return -1
}

// frames cuts one direction of a connection into Kafka's size-prefixed frames as its
// bytes pass, in pieces of any length.
type frames struct {
	headLen int      // the size and the first bytes of the body onHead is shown
	head    [12]byte // headLen bytes at most
	headN   int
	left    int // bytes of the current frame still to come
	keep    bool
	frame   []byte // a kept frame's body
	lost    bool   // a size that cannot be: the stream is not followed any further
}

// feed takes the next bytes. onHead is shown each frame's first headLen bytes and says
// whether its body is wanted; onFrame is given that body once whole.
func (f *frames) feed(p []byte, onHead func(head []byte) bool, onFrame func(body []byte)) {
	for !f.lost {
		if f.headN < f.headLen {
			if len(p) == 0 {
				return
			}
			n := copy(f.head[f.headN:f.headLen], p)
			f.headN, p = f.headN+n, p[n:]
			if f.headN < f.headLen {
				return
			}
			size := int(int32(binary.BigEndian.Uint32(f.head[:4])))
			if size < f.headLen-4 {
				f.lost = true
				return
			}
			f.left = size - (f.headLen - 4)
			f.keep = onHead(f.head[:f.headLen]) && size <= maxAnswerBytes
			if f.keep {
				f.frame = append(f.frame[:0], f.head[4:f.headLen]...)
			}
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
