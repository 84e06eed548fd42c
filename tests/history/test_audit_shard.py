"""The audit against a real shard core: what the shard wrote is what the audit owes.

A `ShardCore` lives through an hour of a few schedules (a cron changed mid-window,
a pause and a resume, a delete, a max_runs, a misfire backlog folded into one
result), every record it writes is stamped with its instant, and the recorder's own
row makers (`to_row`, `ChangelogTracker`) fill a history database. The audit of the
hour then finds no gap, and owes exactly the instants the shard accounted for;
deleting one run from the database (a result made to vanish) is reported as a gap
at that instant and nowhere else.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson

from actors.audit.versions import ChangelogTracker
from actors.audit.walk import GAP, PENDING
from actors.history.audit import AuditSource, slo
from actors.history.recorder import to_row
from actors.history.store import HistoryStore, Row
from tests.kit.shard import MINUTE, SECOND, T0, Shard, command, upsert
from topics.covers import Covers
from topics.messages import covers_of, parse_result, parse_run, result_value
from topics.names import TopicKind
from topics.records import OutRecord
from topics.vocabulary import RunStatus


class Recorded:
    """A shard whose every written record becomes history rows, stamped as written."""

    def __init__(self) -> None:
        self.shard = Shard()
        self.tracker = ChangelogTracker()
        self.rows: list[Row] = []
        self.offsets: dict[TopicKind, int] = {}
        self.owed: set[tuple[str, int]] = set()  # every instant the shard accounted for
        # Each first attempt's instant, and how long after it it started.
        self.started_late_ms: list[tuple[int, int]] = []

    def _take(self, records: list[OutRecord]) -> None:
        now = self.shard.now_ms
        for record in records:
            kind = TopicKind(record.topic)
            offset = self.offsets.get(kind, 0)
            self.offsets[kind] = offset + 1
            if kind is TopicKind.SCHEDULES:
                self.rows += self.tracker.feed(0, offset, record.key, record.value, now)
            elif kind in (TopicKind.RUNS, TopicKind.RESULTS):
                row = to_row(kind, 0, offset, record.key, record.value, now)
                if row is not None:
                    self.rows.append(row)
                self._owe(kind, record.value)

    def _owe(self, kind: TopicKind, value: bytes | None) -> None:
        assert value is not None
        doc = orjson.loads(value)
        if kind is TopicKind.RUNS and "run_id" in doc and doc.get("attempt") == 1:
            run = parse_run(value)
            self.owed.add((run.schedule_id, run.scheduled_ms))
            late_ms = run.fired_ms + 40 - run.scheduled_ms  # see `finish`
            self.started_late_ms.append((run.scheduled_ms, late_ms))
        if kind is TopicKind.RESULTS and doc["status"] in ("missed", "skipped"):
            result = parse_result(value)
            covers: Covers | None = covers_of(result)
            assert result.scheduled_ms is not None
            self.owed.add((result.schedule_id, result.scheduled_ms))
            if covers is not None:
                self.owed.add((result.schedule_id, covers.to_ms))  # its ends, at least

    def send(self, body: dict[str, object], at_ms: int) -> None:
        self._take(self.shard.send(body, at_ms=at_ms, produced_ms=at_ms).records)

    def run_until(self, to_ms: int, *, finish: bool = True) -> None:
        """Advance at every due instant (as a runtime), each batch stamped then; each
        run a worker finishes a second after it fired."""
        core = self.shard.core
        while True:
            due = core.next_due_ms()
            if due is None or due > to_ms:
                break
            self.shard.now_ms = max(self.shard.now_ms, due)
            out = self.shard._keep(core.advance(self.shard.now_ms))
            self._take(out.records)
            if finish:
                for run in out.runs:
                    self.finish(run.run_id, run.schedule_id, run.scheduled_ms, run.attempt)
        self.shard.now_ms = to_ms
        self._take(self.shard._keep(core.advance(to_ms)).records)

    def jump(self, to_ms: int) -> None:
        """One late `advance` (a long stop): the misfire policy decides the backlog."""
        self.shard.now_ms = to_ms
        out = self.shard._keep(self.shard.core.advance(to_ms))
        self._take(out.records)
        for run in out.runs:
            self.finish(run.run_id, run.schedule_id, run.scheduled_ms, run.attempt)

    def finish(self, run_id: str, schedule_id: str, scheduled_ms: int, attempt: int) -> None:
        value = result_value(
            run_id=run_id,
            schedule_id=schedule_id,
            task=None,
            attempt=attempt,
            status=RunStatus.SUCCEEDED,
            scheduled_ms=scheduled_ms,
            started_ms=self.shard.now_ms + 40,
            finished_ms=self.shard.now_ms + 90,
            worker="w-1",
            error=None,
        )
        self._take([OutRecord(TopicKind.RESULTS, schedule_id.encode(), value)])
        self._take(self.shard.raw_result(schedule_id.encode(), value).records)


def live_an_hour() -> Recorded:
    r = Recorded()
    r.send(upsert("a", spec={"every": "60s"}), T0)
    r.send(upsert("b", spec={"every": "60s"}, max_runs=3), T0)
    r.send(upsert("c", spec={"every": "1s"}, misfire={"policy": "run_once", "grace_s": 30}), T0)
    r.run_until(T0 + 10 * MINUTE + 30 * SECOND)
    r.send(upsert("a", spec={"cron": "*/2 * * * *", "tz": "UTC"}), T0 + 10 * MINUTE + 30 * SECOND)
    r.run_until(T0 + 20 * MINUTE + 30 * SECOND)
    r.send(command("schedule.pause", "a"), T0 + 20 * MINUTE + 30 * SECOND)
    r.run_until(T0 + 30 * MINUTE + 30 * SECOND)
    r.send(command("schedule.resume", "a"), T0 + 30 * MINUTE + 30 * SECOND)
    r.run_until(T0 + 40 * MINUTE + 30 * SECOND)
    r.send(command("schedule.delete", "b"), T0 + 40 * MINUTE + 30 * SECOND)
    r.jump(T0 + 50 * MINUTE)  # c's 570 one-second instants: one run, the rest missed
    r.run_until(T0 + 60 * MINUTE)
    return r


async def recorded_db(tmp_path: Path, r: Recorded) -> Path:
    path = tmp_path / "h.db"
    async with await HistoryStore.open(path, namespace="ns") as store:
        await store.write(r.rows, {})
    return path


async def test_the_audit_of_a_shards_hour_finds_no_gap_and_owes_what_it_accounted(
    tmp_path: Path,
) -> None:
    r = live_an_hour()
    path = await recorded_db(tmp_path, r)
    with AuditSource(path) as source:
        report = source.audit(T0, T0 + 60 * MINUTE - 1, keep_findings=True)
        assert report.gap_count == 0 and report.counts[PENDING] == 0
        assert report.schedules == 3
        owed = {(one.schedule_id, f.at_ms) for one in report.audits for f in one.findings}
        # Every instant the shard fired or reported is owed, and nothing else (the
        # folded result stands for the instants between its ends).
        assert {(s, t) for s, t in r.owed if t < T0 + 60 * MINUTE} <= owed
        by = {sid: [t for s, t in owed if s == sid] for sid in ("a", "b", "c")}
        assert sorted(by["b"]) == [T0, T0 + MINUTE, T0 + 2 * MINUTE]  # max_runs 3
        # a: every minute until the upsert, every two minutes after it, skipped while
        # paused (reported at the resume), nothing after... it lives on.
        assert T0 + 10 * MINUTE in by["a"] and T0 + 11 * MINUTE not in by["a"]
        assert T0 + 12 * MINUTE in by["a"]
        statuses = {
            f.at_ms: f.outcome.status
            for one in report.audits
            if one.schedule_id == "a"
            for f in one.findings
            if f.outcome is not None
        }
        assert statuses[T0 + 22 * MINUTE] == "skipped" and statuses[T0 + 32 * MINUTE] == "succeeded"
        assert len(by["c"]) == 50 * 60 + 1 + 10 * 60 - 1  # every second of the hour
        assert report.folded > 0  # c's backlog, through the folded result's covers
        assert report.counts["missed"] > 100
        # The SLO: every run started 40 ms after it fired; those fired late (c's one
        # run after the long stop) started late.
        figures = slo(source, T0, T0 + 60 * MINUTE - 1, 5 * SECOND)
        in_window = [late for at, late in r.started_late_ms if at < T0 + 60 * MINUTE]
        assert figures.started == len(in_window)
        assert figures.on_time == sum(1 for late in in_window if late <= 5000)
        assert figures.on_time < figures.started and figures.missed > 100
        # How the window's runs stand: c's backlog missed (100 results, one folded for
        # the rest: a run each), the others succeeded, a's paused span skipped.
        assert 100 < figures.outcomes["missed"] < figures.missed
        assert figures.outcomes["skipped"] >= 1
        assert figures.outcomes["succeeded"] == figures.started
        assert figures.p50_ms is not None and figures.p50_ms >= 40


async def test_a_vanished_run_is_a_gap_at_its_instant_only(tmp_path: Path) -> None:
    r = live_an_hour()
    path = await recorded_db(tmp_path, r)
    vanished = T0 + 14 * MINUTE
    with sqlite3.connect(path) as db:
        assert (
            db.execute(
                "DELETE FROM runs WHERE schedule_id = 'a' AND scheduled_ms = ?", (vanished,)
            ).rowcount
            == 1
        )
    with AuditSource(path) as source:
        report = source.audit(T0, T0 + 60 * MINUTE - 1)
        assert report.gaps == [("a", vanished)] and report.gap_count == 1
        by_id = source.audit(T0, T0 + 60 * MINUTE - 1, ["a"], keep_findings=True)
        assert [f.at_ms for one in by_id.audits for f in one.findings if f.verdict == GAP] == [
            vanished
        ]
        assert source.audit(vanished + 1, T0 + 60 * MINUTE - 1).gap_count == 0


async def test_a_paused_schedule_owes_its_instants_at_the_resume(tmp_path: Path) -> None:
    r = Recorded()
    r.send(upsert("p", spec={"every": "60s"}), T0)
    r.run_until(T0 + 5 * MINUTE + 30 * SECOND)
    r.send(command("schedule.pause", "p"), T0 + 5 * MINUTE + 30 * SECOND)
    r.run_until(T0 + 9 * MINUTE)
    path = await recorded_db(tmp_path, r)
    with AuditSource(path) as source:
        report = source.audit(T0, T0 + 9 * MINUTE)
        assert report.gap_count == 0 and report.counts[PENDING] == 4  # 6, 7, 8, 9
        assert report.counts["succeeded"] == 6
