package kafkron

// Which offset of a runs partition a worker may commit, and its metadata: the port of
// actors/worker/offsets.py (docs/WORKER-PROTOCOL.md §4). Pure: no I/O, no clock.

import (
	"sort"
	"strconv"
	"strings"
)

// MetadataPrefix opens every metadata string this format writes.
const MetadataPrefix = "k1"

// MaxOpenPerPartition bounds the open offsets (and so the metadata's length).
const MaxOpenPerPartition = 256

// MaxBacklogPerPartition bounds the records fetched beyond the open limit.
const MaxBacklogPerPartition = 1024

// PartitionOffsets is the offset bookkeeping of one assigned runs partition.
type PartitionOffsets struct {
	committed    int64
	end          int64
	order        []int64 // delivered or restored-open offsets, ascending, from the lowest unfinished
	pending      map[int64]bool
	restoredOpen []int64
}

// NewPartitionOffsets restores the bookkeeping from a commit and its metadata.
func NewPartitionOffsets(committed int64, metadata string) *PartitionOffsets {
	end, open := DecodeMetadata(committed, metadata)
	p := &PartitionOffsets{committed: committed, end: end, pending: map[int64]bool{}}
	p.restoredOpen = append([]int64(nil), open...)
	p.order = append([]int64(nil), open...)
	for _, o := range open {
		p.pending[o] = true
	}
	return p
}

// Deliver takes a consumed record's offset; true if its record must run.
func (p *PartitionOffsets) Deliver(offset int64) bool {
	for len(p.restoredOpen) > 0 && p.restoredOpen[0] < offset {
		gone := p.restoredOpen[0]
		p.restoredOpen = p.restoredOpen[1:]
		p.Finish(gone) // deleted by retention: it can never finish
	}
	if len(p.restoredOpen) > 0 && p.restoredOpen[0] == offset {
		p.restoredOpen = p.restoredOpen[1:]
		return true
	}
	if offset < p.end {
		return false
	}
	p.order = append(p.order, offset)
	p.pending[offset] = true
	p.end = offset + 1
	return true
}

// Finish marks an offset finished (idempotent).
func (p *PartitionOffsets) Finish(offset int64) {
	if !p.pending[offset] {
		return
	}
	delete(p.pending, offset)
	for len(p.order) > 0 && !p.pending[p.order[0]] {
		p.order = p.order[1:]
	}
}

// CommitOffset is the offset to commit now.
func (p *PartitionOffsets) CommitOffset() int64 {
	if len(p.order) > 0 {
		return p.order[0]
	}
	if p.end > p.committed {
		return p.end
	}
	return p.committed
}

// OpenCount is the number of unfinished offsets.
func (p *PartitionOffsets) OpenCount() int { return len(p.pending) }

// HeldCount leaves out restored open offsets not delivered again yet.
func (p *PartitionOffsets) HeldCount() int { return len(p.pending) - len(p.restoredOpen) }

// AddsOpen says whether delivering offset may add an open record.
func (p *PartitionOffsets) AddsOpen(offset int64) bool { return offset >= p.end }

// OpenOffsets lists the unfinished offsets, ascending.
func (p *PartitionOffsets) OpenOffsets() []int64 {
	out := make([]int64, 0, len(p.pending))
	for o := range p.pending {
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Metadata is the string committed with CommitOffset.
func (p *PartitionOffsets) Metadata() string {
	base := p.CommitOffset()
	end := p.end
	if base > end {
		end = base
	}
	parts := []string{MetadataPrefix, strconv.FormatInt(end-base, 10)}
	open := p.OpenOffsets()
	if len(open) > 1 {
		for _, o := range open[1:] {
			parts = append(parts, strconv.FormatInt(o-base, 10))
		}
	}
	return strings.Join(parts, " ")
}

// MarkCommitted records that Kafka holds offset.
func (p *PartitionOffsets) MarkCommitted(offset int64) {
	if offset > p.committed {
		p.committed = offset
	}
}

// FetchFrom is where the consumer should fetch next.
func (p *PartitionOffsets) FetchFrom() int64 {
	if len(p.restoredOpen) > 0 {
		return p.restoredOpen[0]
	}
	if p.end > p.committed {
		return p.end
	}
	return p.committed
}

// DecodeMetadata is actors/worker/offsets.py: decode_metadata: (end, open offsets).
// Anything unrecognised means nothing is known beyond the committed offset.
func DecodeMetadata(committed int64, metadata string) (int64, []int64) {
	if metadata == "" {
		return committed, nil
	}
	parts := strings.Split(metadata, " ")
	if parts[0] != MetadataPrefix || len(parts) < 2 {
		return committed, nil
	}
	rel := make([]int64, 0, len(parts)-1)
	for _, s := range parts[1:] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || !plainInt(s) {
			return committed, nil
		}
		rel = append(rel, n)
	}
	endRel, openRel := rel[0], rel[1:]
	if endRel < 0 {
		return committed, nil
	}
	for _, r := range openRel {
		if r <= 0 || r >= endRel {
			return committed, nil
		}
	}
	if endRel == 0 {
		return committed, nil
	}
	seen := map[int64]bool{}
	open := []int64{committed}
	for _, r := range openRel {
		if !seen[r] {
			seen[r] = true
			open = append(open, committed+r)
		}
	}
	sort.Slice(open, func(i, j int) bool { return open[i] < open[j] })
	return committed + endRel, open
}

// plainInt accepts what Python's int() accepts for these strings: optional sign, digits.
func plainInt(s string) bool {
	if s == "" {
		return false
	}
	if s[0] == '-' || s[0] == '+' {
		s = s[1:]
	}
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
