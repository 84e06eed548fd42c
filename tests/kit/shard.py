"""Driving a `ShardCore` with records alone, as the runtime would (for the shard tests).

`Shard` wraps one core: it numbers offsets, keeps every record the core returned,
keeps the changelog as a compacted topic would (last value per key, in order),
and parses what came out so tests read like the behaviour they check.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from actors.shard import ShardCore
from actors.shard.retired import is_gone_key
from actors.shard.state import is_definition_key
from topics.messages import (
    DeadLetter,
    Rejected,
    Result,
    Run,
    RunCancelRecord,
    is_cancel,
    parse_cancel,
    parse_dlq,
    parse_rejected,
    parse_result,
    parse_run,
    result_value,
)
from topics.names import TopicKind
from topics.records import InRecord, OutRecord
from topics.timefmt import parse_instant

T0 = parse_instant("2026-10-10T00:00:00Z")
SECOND = 1000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
DAY = 24 * HOUR


def upsert(schedule_id: str = "s", **fields: Any) -> dict[str, Any]:
    """A schedule.upsert body; ``spec`` defaults to every 60 s."""
    body: dict[str, Any] = {
        "v": 1,
        "type": "schedule.upsert",
        "id": schedule_id,
        "spec": {"every": "60s"},
        "job": {"name": "test.job", "args": {}},
    }
    body.update(fields)
    return body


def command(kind: str, schedule_id: str = "s", **fields: Any) -> dict[str, Any]:
    return {"v": 1, "type": kind, "id": schedule_id, **fields}


class Out:
    """The records of one call, split by topic and parsed."""

    def __init__(self, records: list[OutRecord]) -> None:
        self.records = records

    def of(self, kind: TopicKind) -> list[OutRecord]:
        return [r for r in self.records if r.topic == kind]

    @property
    def runs(self) -> list[Run]:
        """The runs on {ns}.runs (cancel records left out: see `cancels`)."""
        return [
            parse_run(r.value)
            for r in self.of(TopicKind.RUNS)
            if r.value is not None and not is_cancel(r.value)
        ]

    @property
    def cancels(self) -> list[RunCancelRecord]:
        return [
            parse_cancel(r.value)
            for r in self.of(TopicKind.RUNS)
            if r.value is not None and is_cancel(r.value)
        ]

    @property
    def results(self) -> list[Result]:
        return [parse_result(r.value) for r in self.of(TopicKind.RESULTS) if r.value is not None]

    @property
    def dlq(self) -> list[DeadLetter]:
        return [parse_dlq(r.value) for r in self.of(TopicKind.DLQ) if r.value is not None]

    @property
    def rejected(self) -> list[Rejected]:
        return [parse_rejected(r.value) for r in self.of(TopicKind.REJECTED) if r.value is not None]

    @property
    def forwards(self) -> list[OutRecord]:
        return self.of(TopicKind.COMMANDS)

    @property
    def changelog(self) -> list[OutRecord]:
        """The schedules' own changelog records (not their definitions' records, nor
        deleted schedules' floors)."""
        return [
            r
            for r in self.of(TopicKind.SCHEDULES)
            if not is_definition_key(r.key or b"") and not is_gone_key(r.key or b"")
        ]

    @property
    def gone(self) -> list[OutRecord]:
        """The changelog records of deleted schedules' floors (`actors.shard.retired`)."""
        return [r for r in self.of(TopicKind.SCHEDULES) if is_gone_key(r.key or b"")]

    @property
    def definitions(self) -> list[OutRecord]:
        """The changelog records of definitions (version 2, see `actors.shard.state`)."""
        return [r for r in self.of(TopicKind.SCHEDULES) if is_definition_key(r.key or b"")]

    def statuses(self) -> list[str]:
        return [r.status for r in self.results]


class Shard:
    """One core and everything it wrote."""

    def __init__(
        self,
        *,
        partition: int = 0,
        partitions: int = 1,
        now_ms: int = T0,
        core: ShardCore | None = None,
    ) -> None:
        self.partition = partition
        self.partitions = partitions
        self.now_ms = now_ms
        self.core = core or ShardCore(partition=partition, partitions=partitions, now_ms=now_ms)
        self.offsets = {TopicKind.COMMANDS: 0, TopicKind.RESULTS: 0}
        self.written: list[OutRecord] = []
        self.changelog: dict[bytes, bytes | None] = {}

    def _keep(self, records: list[OutRecord]) -> Out:
        self.written.extend(records)
        for record in records:
            if record.topic == TopicKind.SCHEDULES:
                assert record.key is not None
                assert record.partition == self.partition
                self.changelog.pop(record.key, None)  # compaction keeps the latest, in order
                self.changelog[record.key] = record.value
        return Out(records)

    def send(
        self,
        body: Mapping[str, Any] | bytes | None,
        *,
        key: bytes | str | None = "id",
        at_ms: int | None = None,
        produced_ms: int = 0,
    ) -> Out:
        """Apply one {ns}.commands record (key defaults to the body's id); its
        timestamp is ``produced_ms`` (0: unknown, as a record without one)."""
        if at_ms is not None:
            self.now_ms = at_ms
        value = body if isinstance(body, bytes) or body is None else orjson.dumps(body)
        if key == "id":
            assert isinstance(body, Mapping)
            key = str(body["id"]).encode()
        assert not isinstance(key, str)
        offset = self.offsets[TopicKind.COMMANDS]
        self.offsets[TopicKind.COMMANDS] += 1
        record = InRecord(TopicKind.COMMANDS, self.partition, offset, key, value, produced_ms)
        return self._keep(self.core.apply(record, self.now_ms))

    def report(
        self,
        run: Run,
        status: str,
        *,
        attempt: int | None = None,
        error: Mapping[str, str] | None = None,
        at_ms: int | None = None,
        worker: str = "w-1",
    ) -> Out:
        """Apply a worker's result for ``run`` (its attempt unless told otherwise)."""
        if at_ms is not None:
            self.now_ms = at_ms
        if status == "failed" and error is None:
            error = {"type": "RuntimeError", "message": "boom"}
        value = result_value(
            run_id=run.run_id,
            schedule_id=run.schedule_id,
            task=run.task,
            attempt=run.attempt if attempt is None else attempt,
            status=status,
            scheduled_ms=run.scheduled_ms,
            started_ms=self.now_ms,
            finished_ms=self.now_ms,
            worker=worker,
            error=error,
        )
        return self.raw_result(run.schedule_id.encode(), value)

    def raw_result(self, key: bytes | None, value: bytes | None) -> Out:
        offset = self.offsets[TopicKind.RESULTS]
        self.offsets[TopicKind.RESULTS] += 1
        record = InRecord(TopicKind.RESULTS, self.partition, offset, key, value)
        return self._keep(self.core.apply(record, self.now_ms))

    def learn_calendar(
        self,
        name: str,
        value: bytes | None,
        at_ms: int | None = None,
        written_ms: int | None = None,
    ) -> None:
        """A ``{ns}.calendars`` record reaches this core (its writes go out with the
        next `advance`); ``written_ms``: the record's timestamp (its commit)."""
        if at_ms is not None:
            self.now_ms = at_ms
        self.core.learn_calendar(name, value, self.now_ms, written_ms)

    def advance(self, to_ms: int) -> Out:
        """Move time to ``to_ms`` in one call to `advance`."""
        self.now_ms = to_ms
        return self._keep(self.core.advance(to_ms))

    def run_until(self, to_ms: int) -> Out:
        """Move time to ``to_ms`` as a runtime would: advance at every due instant."""
        records: list[OutRecord] = []
        while True:
            due = self.core.next_due_ms()
            if due is None or due > to_ms:
                break
            self.now_ms = max(self.now_ms, due)
            records.extend(self.core.advance(self.now_ms))
        self.now_ms = to_ms
        records.extend(self.core.advance(to_ms))
        return self._keep(records)

    def restored(
        self,
        now_ms: int | None = None,
        calendars: Sequence[tuple[str, bytes | None] | tuple[str, bytes | None, int]] = (),
        written_ms: int | None = None,
        fresh_ms: int | None = None,
    ) -> tuple[Shard, Out]:
        """A new shard rebuilt from this one's changelog (as a new owner would);
        ``calendars``: the ``{ns}.calendars`` records it is told before it finishes,
        in order, each with its own record timestamp (a third item) or
        ``written_ms`` (None: not known); ``fresh_ms``: how fresh the follower says
        they are (None: not told, the book taken as complete)."""
        at_ms = self.now_ms if now_ms is None else now_ms
        core = ShardCore(partition=self.partition, partitions=self.partitions, now_ms=at_ms)
        for key, value in self.changelog.items():
            core.restore(key, value)
        for name, calendar, *stamp in calendars:
            core.learn_calendar(name, calendar, at_ms, stamp[0] if stamp else written_ms)
        if fresh_ms is not None:
            core.calendars_fresh(fresh_ms)
        shard = Shard(partition=self.partition, partitions=self.partitions, now_ms=at_ms, core=core)
        shard.changelog = dict(self.changelog)
        shard.offsets = dict(self.offsets)
        # What the worker side saw before the failover (to report results of it).
        shard.written = [r for r in self.written if r.topic == TopicKind.RUNS]
        return shard, shard._keep(core.finish_restore(at_ms))

    def last_attempt(self, run_id: str) -> Run:
        """The latest attempt of ``run_id`` the shard emitted."""
        for record in reversed(self.written):
            if (
                record.topic == TopicKind.RUNS
                and record.value is not None
                and not is_cancel(record.value)
            ):
                run = parse_run(record.value)
                if run.run_id == run_id:
                    return run
        raise AssertionError(f"no run {run_id} was emitted")

    def written_runs(self) -> list[Run]:
        """Every run record the shard wrote (cancel records left out), in order."""
        return [
            parse_run(r.value)
            for r in self.written
            if r.topic == TopicKind.RUNS and r.value is not None and not is_cancel(r.value)
        ]

    def in_flight(self, schedule_id: str = "s") -> list[Run]:
        """The current attempts of the runs in flight, as the worker received them."""
        state = self.core.schedule(schedule_id)
        return [] if state is None else [self.last_attempt(rid) for rid in state.runs]

    def state_doc(self, schedule_id: str = "s") -> Any:
        value = self.changelog.get(schedule_id.encode())
        return None if value is None else orjson.loads(value)
