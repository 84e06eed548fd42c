package kafkron

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// consumerDial: the dial function of the consumer Run builds (consumerOpts around the
// admin client's dial function).
func consumerDial(t *testing.T, w *Worker) dialFunc {
	t.Helper()
	adminCl, err := kgo.NewClient(w.clientOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(adminCl.Close)
	consumer, err := kgo.NewClient(w.consumerOpts(adminCl.OptValue(kgo.Dialer).(dialFunc))...)
	if err != nil {
		t.Fatalf("consumer options: %v", err)
	}
	t.Cleanup(consumer.Close)
	dial, ok := consumer.OptValue(kgo.Dialer).(dialFunc)
	if !ok || dial == nil {
		t.Fatal("the consumer has no dial function of its own: its connections are not read")
	}
	return dial
}

// The consumer dials through the group-answer reader: without it no answer is ever
// heard and every worker drops its partitions one lease after it starts.
func TestTheConsumerDialsThroughTheGroupAnswerReader(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	w := NewWorker(Options{Namespace: "x", Bootstrap: []string{"127.0.0.1:1"}, WorkerID: "w",
		SessionTimeout: 10 * time.Second})
	conn, err := consumerDial(t, w)(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, ok := conn.(*answerConn); !ok {
		t.Fatalf("the consumer dials %T, not through groupAnswers", conn)
	}
}

// With SSL the consumer's options build (its Dialer beside DialTLSConfig(nil)), its
// connections are TLS inside the reader, and a heartbeat answered without error over
// TLS renews the worker's lease from the request's write.
func TestAHeartbeatAnsweredOverTLSRenewsTheLease(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 4096)
		c.Read(buf) // the heartbeat request
		c.Write(answer(heartbeatAnswer(4, 0), 1))
		c.Read(buf)
	}()
	opts, err := Security{Protocol: "SSL", CAFile: ca}.Opts()
	if err != nil {
		t.Fatal(err)
	}
	w := NewWorker(Options{Namespace: "x", Bootstrap: []string{"127.0.0.1:1"}, WorkerID: "w",
		SessionTimeout: 10 * time.Second, ClientOpts: opts})
	w.start = time.Now().Add(-time.Hour) // the lease's clock well past 0
	conn, err := consumerDial(t, w)(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	watched, ok := conn.(*answerConn)
	if !ok {
		t.Fatalf("the consumer dials %T, not through groupAnswers", conn)
	}
	if _, ok := watched.Conn.(*tls.Conn); !ok {
		t.Fatalf("inside the reader: %T, want *tls.Conn", watched.Conn)
	}
	before := w.mono()
	if _, err := conn.Write(request(heartbeatRequest(4), 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Read(make([]byte, 4096)); err != nil {
		t.Fatal(err)
	}
	if heard := w.lastHeard.Load(); heard < before || heard > w.mono() {
		t.Fatalf("lease heard at %d, want the heartbeat's write (%d..%d)", heard, before, w.mono())
	}
}
