"""Which offset of a runs partition a worker may commit, and what it must remember.

A worker runs the records of one partition concurrently and they finish in any
order, but Kafka keeps a single committed offset per partition. The rule:

    committed offset = the lowest unfinished offset delivered to us,
                       or (last delivered offset + 1) when every delivered one finished

so everything below the committed offset is finished. Finished records *above* it
(a short run that completed while a long one ahead of it still runs) are the
problem: after a crash the next owner starts at the committed offset and would run
them a second time, writing a second visible result for the same attempt. So every
commit also carries, in the offset's metadata string, the offsets that are still
*open* above it and the end of what was delivered::

    o1 = 0
    metadata = "k1 <end - committed> <open_2 - committed> <open_3 - committed> ..."

A restored owner skips every record in ``[committed, end)`` that is not listed as
open: exactly the unfinished runs are delivered again. Open offsets are what runs
or waits in memory, so the list stays short (the worker delivers no more runs of a
partition that holds ``MAX_OPEN_PER_PARTITION`` open records: further records wait
undelivered in its backlog), while the finished window behind a
long job may grow without bound at no cost in metadata.

Offsets within a partition are not contiguous integers: transaction markers and
aborted records take offsets that a read_committed consumer never sees. The tracker
only reasons about offsets it was handed, in delivery order.

Guarantees (checked by property tests):
- ``commit_offset()`` never decreases and never passes an unfinished delivered offset;
- restoring from ``(commit_offset(), metadata())`` and redelivering from the
  committed offset runs exactly the offsets that were open, no finished one.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections import deque

METADATA_PREFIX = "k1"

# Kafka's default offset.metadata.max.bytes is 4096; a relative offset costs at most
# 11 characters, so 256 open offsets stay well inside it.
MAX_OPEN_PER_PARTITION = 256

# Records fetched beyond the open limit and held undelivered, per partition. Up to
# this many the partition is still fetched, so a cancel record produced after a
# burst reaches the worker while the burst's jobs run. Memory is the bound: up to
# this many records plus one fetch, per partition (whole records, job args included).
MAX_BACKLOG_PER_PARTITION = 1024


class PartitionOffsets:
    """Offset bookkeeping of one assigned runs partition."""

    __slots__ = ("_committed", "_end", "_order", "_pending", "_restored_open")

    def __init__(self, committed: int, metadata: str | None = None) -> None:
        if committed < 0:
            raise ValueError(f"committed offset must be >= 0, got {committed}")
        self._committed = committed
        restored_end, restored_open = decode_metadata(committed, metadata)
        # Open offsets not yet delivered again, from the previous owner's commit.
        self._restored_open: deque[int] = deque(restored_open)
        # Delivered (or restored-open) offsets in increasing order, finished or not,
        # from the lowest unfinished one on; finished ones drop off the front.
        self._order: deque[int] = deque(restored_open)
        self._pending: set[int] = set(restored_open)
        self._end = restored_end

    # --- delivery ---------------------------------------------------------------

    def deliver(self, offset: int) -> bool:
        """A record at ``offset`` was consumed; True if it must run.

        False for records that are already finished: below the committed offset, in
        the restored finished window, or delivered before (a re-fetch after a seek).
        """
        restored = self._restored_open
        while restored and restored[0] < offset:
            # An open offset that the log no longer delivers (deleted by retention)
            # can never finish; treat it as done so the partition moves on.
            self._finish(restored.popleft())
        if restored and restored[0] == offset:
            restored.popleft()
            return True
        if offset < self._end:
            return False
        self._order.append(offset)
        self._pending.add(offset)
        self._end = offset + 1
        return True

    def finish(self, offset: int) -> None:
        """The run at ``offset`` has its result (or needs none); idempotent."""
        self._finish(offset)

    def _finish(self, offset: int) -> None:
        pending = self._pending
        if offset not in pending:
            return
        pending.discard(offset)
        order = self._order
        while order and order[0] not in pending:
            order.popleft()

    # --- what to commit -----------------------------------------------------------

    def commit_offset(self) -> int:
        """The offset to commit now: every delivered offset below it is finished."""
        if self._order:
            return self._order[0]
        return max(self._end, self._committed)

    def open_count(self) -> int:
        """Delivered records not finished yet (running or waiting for a slot)."""
        return len(self._pending)

    def held_count(self) -> int:
        """Open records delivered to this process and not finished: ``open_count()``
        without the restored open offsets not delivered again yet. Those are not in
        memory; they are what the consumer must fetch next, so they must not count
        against an open limit (a partition handed over at the limit would otherwise
        wait for runs it never fetches)."""
        return len(self._pending) - len(self._restored_open)

    def adds_open(self, offset: int) -> bool:
        """Whether delivering ``offset`` may add an open record: a new one, past
        everything delivered or restored. Records below (restored open ones, the
        finished window) never raise the open count."""
        return offset >= self._end

    def open_offsets(self) -> list[int]:
        """Unfinished offsets, ascending (the first is ``commit_offset()`` if any)."""
        return sorted(self._pending)

    def metadata(self) -> str:
        """The metadata string to commit with ``commit_offset()``."""
        base = self.commit_offset()
        end = max(self._end, base)
        parts = [METADATA_PREFIX, str(end - base)]
        parts.extend(str(o - base) for o in self.open_offsets()[1:])
        return " ".join(parts)

    def mark_committed(self, offset: int) -> None:
        """Kafka now holds ``offset`` (a commit of ``commit_offset()`` went through)."""
        self._committed = max(self._committed, offset)

    @property
    def committed(self) -> int:
        return self._committed

    def fetch_from(self) -> int:
        """Where the consumer should fetch next: the first open offset not delivered
        again yet (after a restore), else one past the highest delivered."""
        if self._restored_open:
            return self._restored_open[0]
        return max(self._end, self._committed)

    @property
    def end(self) -> int:
        """One past the highest offset delivered (where the consumer should fetch next)."""
        return self._end


def decode_metadata(committed: int, metadata: str | None) -> tuple[int, list[int]]:
    """``(end, open offsets above committed)`` from a commit's metadata.

    Anything unrecognised (another tool's commit, an empty string) means "nothing
    known beyond the committed offset": every record from it on runs.
    """
    if not metadata:
        return committed, []
    parts = metadata.split(" ")
    if parts[0] != METADATA_PREFIX or len(parts) < 2:
        return committed, []
    try:
        relative = [int(p) for p in parts[1:]]
    except ValueError:
        return committed, []
    end_rel, open_rel = relative[0], relative[1:]
    if end_rel < 0 or any(r <= 0 or r >= end_rel for r in open_rel):
        return committed, []
    if end_rel == 0:
        return committed, []
    # The committed offset itself was open when it was committed (unless every
    # delivered record had finished, in which case end == committed).
    open_offsets = [committed, *sorted({committed + r for r in open_rel})]
    return committed + end_rel, open_offsets
