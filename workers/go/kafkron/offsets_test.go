package kafkron

import (
	"reflect"
	"testing"
)

func TestMetadataExamples(t *testing.T) {
	// docs/WORKER-PROTOCOL.md §4: "k1 9 3 7" from committed c = 100.
	end, open := DecodeMetadata(100, "k1 9 3 7")
	if end != 109 || !reflect.DeepEqual(open, []int64{100, 103, 107}) {
		t.Fatalf("got %d %v", end, open)
	}
	for _, bad := range []string{"", "k2 5", "k1", "k1 x", "k1 0", "k1 5 5", "k1 5 0", "k1 -1", "k1  5"} {
		if end, open := DecodeMetadata(7, bad); end != 7 || open != nil {
			t.Fatalf("%q: got %d %v", bad, end, open)
		}
	}
}

func TestOffsetsRoundTrip(t *testing.T) {
	p := NewPartitionOffsets(100, "")
	for o := int64(100); o < 109; o++ {
		if !p.Deliver(o) {
			t.Fatalf("offset %d not delivered", o)
		}
	}
	for _, o := range []int64{101, 102, 104, 105, 106, 108} {
		p.Finish(o)
	}
	if p.CommitOffset() != 100 || p.Metadata() != "k1 9 3 7" {
		t.Fatalf("got %d %q", p.CommitOffset(), p.Metadata())
	}
	next := NewPartitionOffsets(p.CommitOffset(), p.Metadata())
	var ran []int64
	for o := int64(100); o < 112; o++ {
		if next.Deliver(o) {
			ran = append(ran, o)
		}
	}
	if !reflect.DeepEqual(ran, []int64{100, 103, 107, 109, 110, 111}) {
		t.Fatalf("ran %v", ran)
	}
	p.Finish(100)
	if p.CommitOffset() != 103 || p.Metadata() != "k1 6 4" {
		t.Fatalf("got %d %q", p.CommitOffset(), p.Metadata())
	}
}
