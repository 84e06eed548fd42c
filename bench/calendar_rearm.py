"""How long one shard takes to re-arm the schedules that share a calendar after an edit.

A shard holds N schedules (default 10,000) that all exclude one named calendar
(``{"any": [{"cron": "0 9 * * *", "tz": "Europe/London"}], "exclude": ["uk"],
"adjust": "next_business_day"}``), plus N schedules that name none. The calendar is
edited (a holiday added in front of every schedule's next fire): `learn_calendar`
re-arms the N users through the shard's calendar index, and the next `advance`
writes their changelog records. What counts is the CPU time of both, everything
included (compiling the spec once with the new days, each schedule's next fire,
the wheel, the changelog records). Target: <= 1 s for 10,000.

Baseline, in the same run: how kafkron re-armed before named calendars, a
``schedule.upsert`` of each of the N schedules with the edited calendar written
inline (applied one by one, as the commands arrive). The ratio is edit / baseline.

Every phase has a timeout (``--timeout-s``) and prints progress to stderr; a run
that cannot measure says so on its last line.

Usage::

    python bench/calendar_rearm.py [--schedules 10000]
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable
from typing import Any

import orjson

from actors.shard import ShardCore
from actors.shard.definition import clear_caches
from topics.calendar_commands import calendar_value
from topics.names import TopicKind
from topics.records import InRecord, OutRecord
from topics.timefmt import parse_instant

T0 = parse_instant("2026-10-10T00:00:00Z")  # a Saturday
EDIT_MS = T0 + 3_600_000
HOLIDAYS = {"tz": "Europe/London", "dates": ["2026-12-25", "2026-12-28"]}
# Monday 12 October added: every schedule's next fire (Monday 09:00) moves to Tuesday.
EDITED = {"tz": "Europe/London", "dates": ["2026-10-12", "2026-12-25", "2026-12-28"]}


def spec(exclude: object) -> dict[str, Any]:
    return {
        "any": [{"cron": "0 9 * * *", "tz": "Europe/London"}],
        "exclude": [exclude, {"calendar": {"weekdays": ["SAT", "SUN"]}}],
        "adjust": "next_business_day",
    }


def upsert(schedule_id: str, the_spec: dict[str, Any]) -> bytes:
    return orjson.dumps(
        {
            "v": 1,
            "type": "schedule.upsert",
            "id": schedule_id,
            "spec": the_spec,
            "job": {"name": "bench.daily", "args": {}},
        }
    )


def built(count: int, exclude: object) -> ShardCore:
    """A shard of ``count`` schedules excluding ``exclude`` and ``count`` that do not."""
    clear_caches()
    core = ShardCore(partition=0, partitions=1, now_ms=T0)
    core.learn_calendar("uk", calendar_value(HOLIDAYS), T0)
    offset = 0
    for i in range(count):
        for schedule_id, the_spec in (
            (f"uses-{i}", spec(exclude)),
            (f"plain-{i}", {"cron": "0 9 * * *", "tz": "Europe/London"}),
        ):
            record = InRecord(
                TopicKind.COMMANDS, 0, offset, schedule_id.encode(), upsert(schedule_id, the_spec)
            )
            offset += 1
            core.apply(record, T0)
    return core


def timed(what: str, timeout_s: float, step: Callable[[], list[OutRecord]]) -> tuple[float, int]:
    """CPU seconds of ``step`` and the changelog records it wrote; raises past the timeout."""
    print(f"{what} ...", file=sys.stderr, flush=True)
    gc.collect()
    wall = time.monotonic()
    started = time.process_time()
    out = step()
    spent = time.process_time() - started
    if time.monotonic() - wall > timeout_s:
        raise TimeoutError(f"{what} took longer than {timeout_s:.0f} s")
    written = sum(1 for r in out if r.topic is TopicKind.SCHEDULES and r.key.startswith(b"uses-"))
    print(f"{what}: {spent:.3f} s CPU, {written:,} records", file=sys.stderr, flush=True)
    return spent, written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--schedules", type=int, default=10_000)
    parser.add_argument("--timeout-s", type=float, default=300.0, help="per phase")
    args = parser.parse_args()
    count = args.schedules
    try:
        print(f"building a shard of {2 * count:,} schedules ...", file=sys.stderr, flush=True)
        core = built(count, "uk")

        def edit() -> list[OutRecord]:
            core.learn_calendar("uk", calendar_value(EDITED), EDIT_MS)
            return core.advance(EDIT_MS)

        edit_s, edited = timed("edit of the shared calendar", args.timeout_s, edit)
        state = core.schedule("uses-0")
        assert state is not None and state.next_ms == parse_instant("2026-10-13T08:00:00Z")

        print("building the baseline shard (inline calendars) ...", file=sys.stderr, flush=True)
        inline = built(count, {"calendar": HOLIDAYS})
        records = [
            InRecord(
                TopicKind.COMMANDS,
                0,
                10 * count + i,
                f"uses-{i}".encode(),
                upsert(f"uses-{i}", spec({"calendar": EDITED})),
            )
            for i in range(count)
        ]

        def reupsert() -> list[OutRecord]:
            out: list[OutRecord] = []
            for record in records:
                out.extend(inline.apply(record, EDIT_MS))
            return out

        base_s, rewritten = timed("baseline: a re-upsert of each", args.timeout_s, reupsert)
        again = inline.schedule("uses-0")
        assert again is not None and again.next_ms == parse_instant("2026-10-13T08:00:00Z")
    except (TimeoutError, AssertionError) as exc:
        print(f"bench calendar_rearm: could not measure ({type(exc).__name__}: {exc})")
        sys.exit(1)
    print(
        f"edit: {count:,} schedules re-armed in {edit_s:.3f} s CPU ({edited:,} changelog"
        f" records); baseline re-upserts {base_s:.3f} s ({rewritten:,}); ratio"
        f" {edit_s / base_s:.3f}"
    )
    print(
        f"bench calendar_rearm: schedules={count} edit_s={edit_s:.3f}"
        f" target_met={edit_s <= 1.0} reupsert_s={base_s:.3f}"
        f" edit_vs_reupsert={edit_s / base_s:.3f}"
    )


if __name__ == "__main__":
    main()
