package kafkron

// One worker transaction: a partition's results and its offset with the metadata, or
// nothing (docs/WORKER-PROTOCOL.md §5; actors/worker/committer.py).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TransactionTimeout is the workers' transaction.timeout.ms (docs/WORKER-PROTOCOL.md §2.2).
const TransactionTimeout = 10 * time.Second

const stepTimeout = 30 * time.Second

// KillBeforeCommitEnv is test-only, never set in production: the conformance suite's
// kill exactly mid-commit (docs/WORKER-PROTOCOL.md §13). With "1", the process kills
// itself (SIGKILL) in its first transaction that holds results, once they and the
// offset are acknowledged and before the commit.
const KillBeforeCommitEnv = "KAFKRON_TEST_KILL_BEFORE_COMMIT"

// Outcome kinds of a write.
const (
	writeDone    = "done"
	writeFailed  = "failed"
	writeFenced  = "fenced"
	writeUnknown = "unknown"
	writeRefused = "refused"
)

// refusedForGood: errors the same records meet again on every retry
// (actors/worker/committer.py: _REFUSED_FOR_GOOD). franz-go also gives
// MessageTooLarge for a record larger than its own batch limit, before sending.
func refusedForGood(err error) bool {
	return errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge) ||
		errors.Is(err, kerr.CorruptMessage) || errors.Is(err, kerr.InvalidTimestamp) ||
		errors.Is(err, kerr.UnsupportedForMessageFormat)
}

// WriteOutcome is how one transaction ended; Refused lists the indices of
// commit.Results the broker refused for good (kind "refused").
type WriteOutcome struct {
	Kind    string
	Reason  string
	Refused []int
}

func fencedError(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) ||
		errors.Is(err, kerr.TransactionalIDAuthorizationFailed) || errors.Is(err, kerr.InvalidProducerIDMapping)
}

// writeCommit carries out one commit with the partition's transactional producer;
// it never panics and says how it ended.
func writeCommit(producer *kgo.Client, names Names, commit *Commit, now func() int64) WriteOutcome {
	kind, why, refused := write(producer, names, commit, now)
	return WriteOutcome{kind, why, refused}
}

func write(producer *kgo.Client, names Names, commit *Commit, now func() int64) (string, string, []int) {
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	if err := producer.BeginTransaction(); err != nil {
		kind, why := classify(err, writeUnknown)
		return kind, why, nil
	}
	abort := func(why string, err error) (string, string, []int) {
		kind, reason := aborted(producer, why, err)
		return kind, reason, nil
	}
	results := names.Topic("results")
	records := make([]*kgo.Record, len(commit.Results))
	index := make(map[*kgo.Record]int, len(commit.Results))
	for i, r := range commit.Results {
		records[i] = &kgo.Record{Topic: results, Key: r.Key, Value: r.Value}
		index[records[i]] = i
	}
	// Every acknowledgement is read before the commit (§5.2).
	produced := producer.ProduceSync(ctx, records...)
	if err := produced.FirstErr(); err != nil {
		var refused []int
		for _, p := range produced {
			if p.Err != nil && fencedError(p.Err) {
				return abort("producing results: "+p.Err.Error(), p.Err)
			}
			if p.Err != nil && refusedForGood(p.Err) {
				refused = append(refused, index[p.Record])
			}
		}
		kind, why := aborted(producer, "producing results: "+err.Error(), err)
		if kind == writeFailed && len(refused) > 0 {
			sort.Ints(refused)
			return writeRefused, err.Error(), refused
		}
		return kind, why, nil
	}
	if err := sendOffsets(ctx, producer, names, commit); err != nil {
		return abort("committing the offset: "+err.Error(), err)
	}
	if len(commit.Results) > 0 && os.Getenv(KillBeforeCommitEnv) == "1" {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way; nothing more of this transaction happens
	}
	if limit := commit.AbortFromMs(); limit >= 0 && now() >= limit {
		return abort("too close to the shard's timed_out verdict", nil)
	}
	if err := producer.EndTransaction(ctx, kgo.TryCommit); err != nil {
		if fencedError(err) {
			return writeFenced, err.Error(), nil
		}
		return writeUnknown, "commit failed midway: " + err.Error(), nil
	}
	return writeDone, "", nil
}

// aborted aborts the open transaction: failed, or fenced, or unknown if the abort failed.
func aborted(producer *kgo.Client, why string, err error) (string, string) {
	actx, acancel := context.WithTimeout(context.Background(), stepTimeout)
	defer acancel()
	if aerr := producer.EndTransaction(actx, kgo.TryAbort); aerr != nil {
		if fencedError(aerr) {
			return writeFenced, aerr.Error()
		}
		return writeUnknown, fmt.Sprintf("%s; the abort failed too (%v)", why, aerr)
	}
	if err != nil && fencedError(err) {
		return writeFenced, err.Error()
	}
	return writeFailed, why
}

func classify(err error, otherwise string) (string, string) {
	if fencedError(err) {
		return writeFenced, err.Error()
	}
	return otherwise, err.Error()
}

// sendOffsets adds the group's offsets to the transaction (AddOffsetsToTxn) and
// commits the partition's offset and metadata in it (TxnOffsetCommit), as a
// transactional producer that is not itself a member of the group.
func sendOffsets(ctx context.Context, producer *kgo.Client, names Names, commit *Commit) error {
	id, epoch, err := producer.ProducerID(ctx)
	if err != nil {
		return err
	}
	txnID := names.WorkerTransactionalID(commit.Partition)
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = txnID, id, epoch, names.WorkerGroup()
	for try := 0; ; try++ {
		resp, err := add.RequestWith(ctx, producer)
		if err != nil {
			return err
		}
		err = kerr.ErrorForCode(resp.ErrorCode)
		if errors.Is(err, kerr.ConcurrentTransactions) && try < 50 {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if err != nil {
			return err
		}
		break
	}
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = txnID, names.WorkerGroup(), id, epoch
	req.Generation, req.MemberID = -1, ""
	topic := kmsg.NewTxnOffsetCommitRequestTopic()
	topic.Topic = names.Topic("runs")
	part := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	part.Partition, part.Offset, part.LeaderEpoch = commit.Partition, commit.Offset, -1
	metadata := commit.Metadata
	part.Metadata = &metadata
	topic.Partitions = append(topic.Partitions, part)
	req.Topics = append(req.Topics, topic)
	resp, err := req.RequestWith(ctx, producer)
	if err != nil {
		return err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return err
			}
		}
	}
	return nil
}
