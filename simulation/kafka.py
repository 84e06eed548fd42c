"""A simulated Kafka, good enough to be wrong in the same ways as the real one.

What it models (and the runtime code in `simulation.node` relies on):

- **Partitions with offsets.** Every append takes the next offset; so does each
  transaction marker (commit or abort), which a consumer never sees, so offsets a
  read_committed consumer receives are not contiguous, as on a real broker.
- **Transactions with epochs.** ``init_transactions(tx_id)`` bumps the id's epoch
  and aborts the id's open transaction: the previous holder is *fenced* and its
  next ``send``/``commit`` raises `ProducerFenced`. Records of a transaction are
  appended when sent and become visible only when it commits; an abort hides them
  forever. A transaction left open longer than its producer's timeout (declared at
  ``init_transactions``, as InitProducerId carries ``transaction.timeout.ms``;
  default `TRANSACTION_TIMEOUT_MS`) is aborted by the broker's reaper, which runs
  every `TRANSACTION_CLEANUP_INTERVAL_MS` (``expire``): until then it holds every
  read_committed reader of its partitions back.
- **read_committed visibility.** A consumer reads up to the last stable offset
  (the first offset of the oldest open transaction of the partition) and skips
  aborted records and markers.
- **Consumer group offsets** (with metadata) written inside a transaction, applied
  at its commit, as ``send_offsets_to_transaction`` does.
- **Compaction** of a topic: superseded committed records (below the last stable
  offset) disappear, offsets stay.
- **Unavailability.** While ``available`` is False every call raises
  `BrokerUnavailable` and the open transactions it touches are lost.

Consumer groups live in `simulation.group`. The test-only switch ``fencing=False``
lets a fenced producer commit anyway: the deliberately broken variant the
checkers must catch.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from topics.names import TopicKind
from topics.partitioner import murmur2_partition
from topics.records import InRecord

TRANSACTION_TIMEOUT_MS = 30_000
"""A producer's ``transaction.timeout.ms`` unless it declares its own (kafkron's
client default, `topics.clients`)."""
TRANSACTION_CLEANUP_INTERVAL_MS = 10_000
"""How often the broker looks for timed-out transactions (the broker setting
``transaction.abort.timed.out.transaction.cleanup.interval.ms``, default 10 s): a
dead producer's transaction can outlive its timeout by up to this much."""

OPEN = "open"
COMMITTED = "committed"
ABORTED = "aborted"


class ProducerFenced(Exception):
    """A newer producer with the same transactional id exists (a newer owner)."""


class BrokerUnavailable(Exception):
    """The broker does not answer; the call did nothing (an open transaction is lost)."""


@dataclass(slots=True, eq=False)
class Txn:
    tx_id: str
    epoch: int
    begun_ms: int
    timeout_ms: int = TRANSACTION_TIMEOUT_MS  # the producer's transaction.timeout.ms
    status: str = OPEN
    first: dict[tuple[TopicKind, int], int] = field(default_factory=dict)
    offsets: dict[tuple[str, TopicKind, int], tuple[int, str | None]] = field(default_factory=dict)
    # Batches the broker refused (the `refuse` fault): their records were never
    # appended, yet the transaction stays open and committable, as aiokafka leaves
    # it; the producer learns of the refusal only from the batch's future.
    refused: list[tuple[TopicKind, int]] = field(default_factory=list)
    # A refused batch's topic was not authorized (the `runs_denied` fault): the
    # producer learns of a missing ACL, not of a passing refusal.
    denied: bool = False


@dataclass(slots=True)
class Entry:
    """One offset of a partition: a record (txn None: written outside a transaction)."""

    key: bytes | None
    value: bytes | None
    txn: Txn | None
    append_ms: int  # the broker's clock (true time) at append: LogAppendTime
    control: bool = False
    compacted: bool = False
    create_ms: int | None = None  # a producer-given timestamp (CreateTime topics keep it)

    def visible(self) -> bool:
        if self.control or self.compacted:
            return False
        return self.txn is None or self.txn.status == COMMITTED


class Log:
    """One partition."""

    __slots__ = ("entries", "kind", "open", "partition")

    def __init__(self, kind: TopicKind, partition: int) -> None:
        self.kind = kind
        self.partition = partition
        self.entries: list[Entry] = []
        self.open: dict[Txn, int] = {}  # open transaction -> its first offset here

    def last_stable_offset(self) -> int:
        if self.open:
            return min(self.open.values())
        return len(self.entries)

    def fetch(self, position: int, max_records: int) -> tuple[list[InRecord], int]:
        """read_committed records from ``position``; the new position."""
        end = self.last_stable_offset()
        out: list[InRecord] = []
        entries = self.entries
        offset = position
        while offset < end and len(out) < max_records:
            entry = entries[offset]
            if entry.visible():
                stamp = entry.append_ms if entry.create_ms is None else entry.create_ms
                out.append(
                    InRecord(self.kind, self.partition, offset, entry.key, entry.value, stamp)
                )
            offset += 1
        return out, offset

    def has_data(self, position: int) -> bool:
        return position < self.last_stable_offset()


class SimKafka:
    """The broker: topics of logs, transactional ids, group offsets."""

    def __init__(
        self,
        partitions: dict[TopicKind, int],
        *,
        fencing: bool = True,
        create_time: frozenset[TopicKind] = frozenset({TopicKind.COMMANDS}),
    ) -> None:
        self.partitions = dict(partitions)
        # CreateTime topics (the producer's stamp); the others are LogAppendTime (runs).
        self.create_time = create_time
        # Topics whose batches the broker refuses right now (the `refuse` fault: a
        # produce error that outlived the client's retries, NOT_ENOUGH_REPLICAS say).
        self.refusing: frozenset[TopicKind] = frozenset()
        # Topics refused as unauthorized now (`runs_denied`: the scheduler's ACL revoked).
        self.denying: frozenset[TopicKind] = frozenset()
        self.target_records: list[Any] = []  # `targets.SentTarget`s: records of Kafka targets
        self.logs = {kind: [Log(kind, p) for p in range(n)] for kind, n in partitions.items()}
        self.fencing = fencing
        self.available = True
        self.unavailable_since_ms = 0  # when it last stopped answering
        self._epochs: dict[str, int] = {}
        self._timeouts: dict[str, int] = {}  # tx_id -> its transaction.timeout.ms
        self._open: dict[Txn, None] = {}  # open transactions, in begin order
        self._group_offsets: dict[tuple[str, TopicKind, int], tuple[int, str | None]] = {}
        self.fenced_total = 0
        self.aborted_total = 0
        self.committed_total = 0
        self.worker_faults = WorkerFaults()
        # An in-flight request the broker never answers (a half-open connection): a
        # client's stop() begun now waits on it forever (aiokafka's fetcher task).
        self.closes_hang = False

    # -- producers -----------------------------------------------------------------

    def _check(self) -> None:
        if not self.available:
            raise BrokerUnavailable("broker unavailable")

    def init_transactions(
        self, tx_id: str, now_ms: int, timeout_ms: int = TRANSACTION_TIMEOUT_MS
    ) -> int:
        """Bump ``tx_id``'s epoch (fencing every older holder); abort its open transaction.

        ``timeout_ms``: the producer's ``transaction.timeout.ms``, which its later
        transactions keep.
        """
        self._check()
        self._timeouts[tx_id] = timeout_ms
        if self.fencing:
            for previous in [t for t in self._open if t.tx_id == tx_id]:
                self._finish(previous, ABORTED, now_ms)
        epoch = self._epochs.get(tx_id, -1) + 1
        self._epochs[tx_id] = epoch
        return epoch

    def _check_epoch(self, txn: Txn) -> None:
        if txn.epoch < self._epochs[txn.tx_id] and self.fencing:
            self.fenced_total += 1
            if txn.status == OPEN:
                self._finish(txn, ABORTED, 0)
            raise ProducerFenced(f"{txn.tx_id} epoch {txn.epoch} is fenced")

    def begin(self, tx_id: str, epoch: int, now_ms: int) -> Txn:
        self._check()
        txn = Txn(tx_id, epoch, now_ms, self._timeouts.get(tx_id, TRANSACTION_TIMEOUT_MS))
        self._check_epoch(txn)
        self._open[txn] = None
        return txn

    def send(
        self,
        txn: Txn,
        kind: TopicKind,
        key: bytes | None,
        value: bytes | None,
        partition: int | None,
        now_ms: int,
        timestamp_ms: int | None = None,
    ) -> tuple[int, int]:
        """Append inside ``txn``: (partition, offset)."""
        self._check()
        self._check_epoch(txn)
        if txn.status != OPEN:
            raise ProducerFenced(f"{txn.tx_id}: transaction already {txn.status}")
        p = self.partition_for(kind, key, partition)
        if kind in self.refusing or kind in self.denying:
            txn.refused.append((kind, p))
            txn.denied = txn.denied or kind in self.denying
            return p, -1
        log = self.logs[kind][p]
        offset = len(log.entries)
        create_ms = timestamp_ms if kind in self.create_time else None
        log.entries.append(Entry(key, value, txn, now_ms, create_ms=create_ms))
        if (kind, p) not in txn.first:
            txn.first[(kind, p)] = offset
            log.open[txn] = offset
        return p, offset

    def send_offsets(
        self,
        txn: Txn,
        group: str,
        offsets: Mapping[tuple[TopicKind, int], tuple[int, str | None]],
    ) -> None:
        self._check()
        self._check_epoch(txn)
        for (kind, p), committed in offsets.items():
            txn.offsets[(group, kind, p)] = committed

    def commit(self, txn: Txn, now_ms: int) -> None:
        """Make ``txn`` visible, atomically; raises if fenced, aborted or unreachable."""
        if not self.available:
            self._finish(txn, ABORTED, now_ms)
            raise BrokerUnavailable("broker unavailable: transaction aborted")
        self._check_epoch(txn)
        if txn.status != OPEN:
            raise ProducerFenced(f"{txn.tx_id}: transaction was {txn.status} by the broker")
        self._finish(txn, COMMITTED, now_ms)
        self._group_offsets.update(txn.offsets)

    def abort(self, txn: Txn, now_ms: int) -> None:
        if txn.status == OPEN:
            self._finish(txn, ABORTED, now_ms)

    def _finish(self, txn: Txn, status: str, now_ms: int) -> None:
        txn.status = status
        self._open.pop(txn, None)
        for kind, p in txn.first:
            log = self.logs[kind][p]
            log.open.pop(txn, None)
            log.entries.append(Entry(None, None, txn, now_ms, control=True))
        if status == COMMITTED:
            self.committed_total += 1
        else:
            self.aborted_total += 1

    def expire(self, now_ms: int) -> list[Txn]:
        """Abort transactions open longer than their timeout (the broker's reaper).

        The reaper runs every `TRANSACTION_CLEANUP_INTERVAL_MS` of the broker's
        clock, so a transaction is aborted at the first run after its timeout.
        """
        reaped_ms = now_ms - now_ms % TRANSACTION_CLEANUP_INTERVAL_MS  # its last run
        old = [t for t in self._open if reaped_ms - t.begun_ms > t.timeout_ms]
        for txn in old:
            self._finish(txn, ABORTED, now_ms)
        return old

    def log_append_time(self, kind: TopicKind) -> bool:
        """Whether the broker stamps this topic's records (what the skew guard needs)."""
        return kind not in self.create_time

    def open_transactions(self) -> int:
        return len(self._open)

    # -- plain appends (clients outside the system; a CreateTime stamp given) ---------
    def append(
        self,
        kind: TopicKind,
        key: bytes | None,
        value: bytes | None,
        partition: int | None,
        now_ms: int,
        created_ms: int | None = None,
    ) -> tuple[int, int]:
        self._check()
        p = self.partition_for(kind, key, partition)
        entries = self.logs[kind][p].entries
        create_ms = created_ms if kind in self.create_time else None  # the producer's stamp
        entries.append(Entry(key, value, None, now_ms, create_ms=create_ms))
        return p, len(entries) - 1

    def partition_for(self, kind: TopicKind, key: bytes | None, partition: int | None) -> int:
        if partition is not None:
            return partition
        if key is None:
            raise ValueError("a record without key needs an explicit partition")
        return murmur2_partition(key, self.partitions[kind])

    # -- consumers -----------------------------------------------------------------

    def fetch(
        self, kind: TopicKind, partition: int, position: int, max_records: int
    ) -> tuple[list[InRecord], int]:
        self._check()
        return self.logs[kind][partition].fetch(position, max_records)

    def end_offset(self, kind: TopicKind, partition: int) -> int:
        """The last stable offset (a read_committed ``ListOffsets`` of the end)."""
        self._check()
        return self.logs[kind][partition].last_stable_offset()

    def committed(self, group: str, kind: TopicKind, partition: int) -> tuple[int, str | None]:
        self._check()
        return self._group_offsets.get((group, kind, partition), (0, None))

    # -- maintenance and views -----------------------------------------------------------

    def compact(self, kind: TopicKind) -> int:
        """Drop superseded committed records below each partition's stable offset."""
        dropped = 0
        for log in self.logs[kind]:
            latest: dict[bytes | None, int] = {}
            end = log.last_stable_offset()
            for offset in range(end):
                entry = log.entries[offset]
                if entry.visible():
                    previous = latest.get(entry.key)
                    if previous is not None:
                        log.entries[previous].compacted = True
                        dropped += 1
                    latest[entry.key] = offset
        return dropped

    # -- the workers' clients (faults: see the section at the end) ---------------------

    def init_for_adoption(self, tx_id: str, now_ms: int, timeout_ms: int) -> int:
        return _init_for_adoption(self, tx_id, now_ms, timeout_ms)

    def committed_for_adoption(
        self, group: str, kind: TopicKind, partition: int
    ) -> tuple[int, str | None]:
        return _committed_for_adoption(self, group, kind, partition)

    def send_result(
        self,
        txn: Txn,
        kind: TopicKind,
        key: bytes | None,
        value: bytes | None,
        partition: int | None,
        now_ms: int,
    ) -> tuple[int, int]:
        return _send_result(self, txn, kind, key, value, partition, now_ms)

    def committed_offset(self, group: str, kind: TopicKind, partition: int) -> int:
        return _committed_offset(self, group, kind, partition)

    def committed_records(self, kind: TopicKind) -> Iterator[tuple[int, int, Entry]]:
        """Every visible record of a topic, as a read_committed reader sees it at the end."""
        for log in self.logs[kind]:
            end = log.last_stable_offset()
            for offset in range(end):
                entry = log.entries[offset]
                if entry.visible():
                    yield log.partition, offset, entry


# -- worker-side faults ------------------------------------------------------------------
# Kept apart from the rest of the broker: what the workers' clients meet besides an
# unavailable broker. The world switches them on and off (`simulation.world`).


class CoordinatorBusy(Exception):
    """COORDINATOR_LOAD_IN_PROGRESS / NOT_COORDINATOR: the call did nothing; retry."""


class RecordRefused(Exception):
    """The broker refused a record inside a transaction; only that send failed (the
    transaction stays open, and committing it would commit everything else)."""

    def __init__(self, message: str, *, for_good: bool) -> None:
        super().__init__(message)
        self.for_good = for_good


@dataclass(slots=True)
class WorkerFaults:
    coordinator_busy: bool = False  # InitProducerId and OffsetFetch answer "loading"
    results_refused: bool = False  # results batches refused (NOT_ENOUGH_REPLICAS)
    max_result_bytes: int | None = None  # larger result records: MESSAGE_TOO_LARGE


def _worker_faults(kafka: SimKafka) -> WorkerFaults:
    return kafka.worker_faults


def _init_for_adoption(kafka: SimKafka, tx_id: str, now_ms: int, timeout_ms: int) -> int:
    kafka._check()
    if _worker_faults(kafka).coordinator_busy:
        raise CoordinatorBusy(f"InitProducerId({tx_id}): COORDINATOR_LOAD_IN_PROGRESS")
    return kafka.init_transactions(tx_id, now_ms, timeout_ms)


def _committed_for_adoption(
    kafka: SimKafka, group: str, kind: TopicKind, partition: int
) -> tuple[int, str | None]:
    kafka._check()
    if _worker_faults(kafka).coordinator_busy:
        raise CoordinatorBusy(f"OffsetFetch({group}): COORDINATOR_LOAD_IN_PROGRESS")
    return kafka.committed(group, kind, partition)


def _send_result(
    kafka: SimKafka,
    txn: Txn,
    kind: TopicKind,
    key: bytes | None,
    value: bytes | None,
    partition: int | None,
    now_ms: int,
) -> tuple[int, int]:
    faults = _worker_faults(kafka)
    if faults.max_result_bytes is not None and len(value or b"") > faults.max_result_bytes:
        raise RecordRefused("MESSAGE_TOO_LARGE", for_good=True)
    if faults.results_refused:
        raise RecordRefused("NOT_ENOUGH_REPLICAS", for_good=False)
    return kafka.send(txn, kind, key, value, partition, now_ms)


def _committed_offset(kafka: SimKafka, group: str, kind: TopicKind, partition: int) -> int:
    """Where a consumer given ``partition`` starts (no fault: the client's own fetch)."""
    return kafka._group_offsets.get((group, kind, partition), (0, None))[0]
