"""The audit of schedules that name a calendar, against a real shard and a brute force.

A `ShardCore` lives through five weeks (across London's DST end) of a schedule that
excludes the named calendar "hol", while "hol" is edited at random instants: new
dates, weekends or not, its zone London or UTC, deleted (and maybe recreated), and
maybe created only after the schedule (which waits for it). Each edit is heard by
the shard at the instant it was written, and recorded by the recorder's own row
makers (`calendar_row`, `ChangelogTracker`, `to_row`), so the history is what a
recorder would hold.

The oracle looks at every minute of the window with zoneinfo and date arithmetic
only: which calendar version judges that minute (the one in effect, else the one
that ended the wait, else the last one there was), whether the rule fires then
(09:00 London on a day the calendar leaves; for the adjusted variant, a Monday or
Thursday, or the first day the calendar leaves after an excluded one, at most 14
days on). The audit must owe exactly those minutes, find no gap in what the shard
did, count as ``waiting`` exactly the minutes judged while no calendar was in effect
that the shard did not account for, and report a run made to vanish as the one gap.
"""

from __future__ import annotations

import random
import sqlite3
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import cast
from zoneinfo import ZoneInfo

import orjson
import pytest

from actors.audit.calendars import calendar_row
from actors.audit.walk import ACCOUNTED, DUE, GAP, WAITING
from actors.history.audit import AuditSource
from tests.history.test_audit_shard import Recorded, recorded_db
from tests.kit.shard import DAY, HOUR, MINUTE, T0, upsert
from topics.calendar_commands import calendar_value

LONDON = ZoneInfo("Europe/London")
END = T0 + 35 * DAY  # T0: Saturday 2026-10-10; London leaves summer time on the 25th
SPECS = {
    "skip": {"any": [{"cron": "0 9 * * *"}], "tz": "Europe/London", "exclude": ["hol"]},
    "next": {
        "any": [{"cron": "0 9 * * MON,THU"}],
        "tz": "Europe/London",
        "exclude": ["hol"],
        "adjust": "next_business_day",
    },
}


def _random_calendar(rng: random.Random) -> dict[str, object]:
    first = date(2026, 10, 1)
    dates = sorted({(first + timedelta(days=rng.randrange(50))).isoformat() for _ in range(12)})
    calendar: dict[str, object] = {"tz": rng.choice(["Europe/London", "UTC"]), "dates": dates}
    if rng.random() < 0.5:
        calendar["weekdays"] = ["SAT", "SUN"]
    return calendar


def _edits(rng: random.Random) -> list[tuple[int, dict[str, object] | None]]:
    """(written at, the calendar or None for a deletion), ascending."""
    first_ms = T0 - HOUR if rng.random() < 0.7 else T0 + rng.randrange(1, 6) * DAY + 5 * HOUR
    edits: list[tuple[int, dict[str, object] | None]] = [(first_ms, _random_calendar(rng))]
    for _ in range(rng.randrange(2, 6)):
        at_ms = T0 + rng.randrange(DAY, 34 * DAY)
        edits.append((at_ms, None if rng.random() < 0.25 else _random_calendar(rng)))
    edits.sort(key=lambda e: e[0])
    return edits


def _holds(calendar: dict[str, object], at_ms: int) -> bool:
    local = datetime.fromtimestamp(at_ms / 1000, ZoneInfo(str(calendar["tz"])))
    weekday = ("MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN")[local.weekday()]
    dates = cast(list[str], calendar["dates"])
    weekdays = cast(list[str], calendar.get("weekdays", []))
    return local.date().isoformat() in dates or weekday in weekdays


def _judging(
    edits: list[tuple[int, dict[str, object] | None]], at_ms: int
) -> tuple[dict[str, object] | None, bool]:
    """The calendar to judge ``at_ms`` by, and whether it was in effect then."""
    before = [c for w, c in edits if w <= at_ms]
    if before and before[-1] is not None:
        return before[-1], True
    after = [c for w, c in edits if w > at_ms and c is not None]
    if after:
        return after[0], False
    known = [c for c in before if c is not None]
    return (known[-1], False) if known else (None, False)


def _nine(day: date) -> int:
    return int(datetime(day.year, day.month, day.day, 9, tzinfo=LONDON).timestamp() * 1000)


def _fires(variant: str, calendar: dict[str, object], at_ms: int) -> bool:
    local = datetime.fromtimestamp(at_ms / 1000, LONDON)
    if (local.hour, local.minute, local.second) != (9, 0, 0) or _holds(calendar, at_ms):
        return False
    day = local.date()
    if variant == "skip" or day.weekday() in (0, 3):
        return True
    for k in range(1, 15):  # the first day left after an excluded Monday or Thursday
        before = day - timedelta(days=k)
        if not _holds(calendar, _nine(before)):
            return False
        if before.weekday() in (0, 3):
            return True
    return False


def _oracle(variant: str, edits: list[tuple[int, dict[str, object] | None]]) -> dict[int, bool]:
    """Every owed minute of [T0, END] -> whether a calendar was in effect then."""
    owed: dict[int, bool] = {}
    for at_ms in range(T0, END + 1, MINUTE):
        if at_ms % HOUR:  # London's offsets are whole hours: 09:00 is on the hour
            continue
        calendar, in_effect = _judging(edits, at_ms)
        if calendar is not None and _fires(variant, calendar, at_ms):
            owed[at_ms] = in_effect
    return owed


def _live(variant: str, edits: list[tuple[int, dict[str, object] | None]]) -> Recorded:
    r = Recorded()
    offset = 0

    def learn(at_ms: int, calendar: dict[str, object] | None) -> None:
        nonlocal offset
        value = None if calendar is None else calendar_value(calendar)
        r.shard.learn_calendar("hol", value, at_ms=at_ms, written_ms=at_ms)
        row = calendar_row(offset, b"hol", value, at_ms)
        assert row is not None
        r.rows.append(row)
        offset += 1

    pending = list(edits)
    while pending and pending[0][0] < T0:
        learn(*pending.pop(0))
    r.send(upsert("cal", spec=SPECS[variant], overlap="allow"), T0)
    for at_ms, calendar in pending:
        r.run_until(at_ms - 1)
        learn(at_ms, calendar)
        r.run_until(at_ms)  # the re-armed record goes out at the edit's instant
    r.run_until(END + HOUR)
    return r


@pytest.mark.parametrize("seed", range(16))
async def test_the_audit_judges_each_instant_by_the_calendar_in_effect_then(
    tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    variant = "skip" if seed % 2 == 0 else "next"
    edits = _edits(rng)
    oracle = _oracle(variant, edits)
    r = _live(variant, edits)
    path = await recorded_db(tmp_path, r)
    with AuditSource(path) as source:
        report = source.audit(T0, END, ["cal"], keep_findings=True)
    findings = [f for one in report.audits for f in one.findings]
    assert [f.at_ms for f in findings] == sorted(oracle), (seed, edits)
    assert report.gap_count == 0, (seed, [f for f in findings if f.verdict == GAP])
    accounted_by_shard = {t for s, t in r.owed if s == "cal" and T0 <= t <= END}
    for finding in findings:
        if finding.verdict == WAITING:
            assert not oracle[finding.at_ms] and finding.at_ms not in accounted_by_shard
        else:
            assert finding.verdict == ACCOUNTED
    # Everything the shard fired or reported is owed (under the calendar then).
    assert accounted_by_shard <= set(oracle), (seed, sorted(accounted_by_shard - set(oracle)))
    # A run made to vanish is a gap at its instant, and only there (an instant owed
    # while no calendar was in effect would count `waiting`, by design).
    fired = [f for f in findings if f.verdict == ACCOUNTED and f.owed == DUE and not f.folded]
    if fired:
        vanished = fired[len(fired) // 2]
        assert vanished.outcome is not None
        with sqlite3.connect(path) as db:
            db.execute("DELETE FROM runs WHERE run_id = ?", (vanished.outcome.run_id,))
        with AuditSource(path) as source:
            broken = source.audit(T0, END)
        assert broken.gaps == [("cal", vanished.at_ms)]


async def test_a_calendar_the_history_never_saw_is_named_and_owes_nothing(
    tmp_path: Path,
) -> None:
    r = Recorded()
    r.send(upsert("cal", spec=SPECS["skip"]), T0)
    r.run_until(T0 + 3 * DAY)
    path = await recorded_db(tmp_path, r)
    with AuditSource(path) as source:
        report = source.audit(T0, T0 + 3 * DAY)
    assert report.expected == 0 and report.gap_count == 0
    assert report.unknown_calendars == [("cal", "hol")]


def test_an_undecodable_calendar_record_is_refused_for_the_recorder_to_skip() -> None:
    with pytest.raises(ValueError):
        calendar_row(0, b"hol", orjson.dumps({"v": 1, "calendar": {"tz": "Mars/Olympus"}}), T0)
    assert calendar_row(3, b"hol", None, T0) is not None  # a deletion is a row
    assert calendar_row(3, None, b"{}", T0) is None  # not a calendar
