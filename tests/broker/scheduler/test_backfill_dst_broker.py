"""A backfill's dry run on the real broker lists exactly the instants a brute-force walk
of the schedule's rule gives, DST days included (docs/DESIGN.md §5.3, §6.9).

Four schedules, in Europe/London and America/New_York, fixed-time under both DST
policies and a wildcard one, are created on a running scheduler and triggered once
(so the history knows them); `kafkron backfill --dry-run --json --reprocess all` then
plans each over last year's March to November, a range holding both of its zone's
transitions. The oracle is `tests.kit.timespec.brute_force_many`: every minute of the
range judged by the documented rule in the zone, from ``zoneinfo`` alone, never from
the compiler the scheduler uses.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import orjson
import pytest

from tests.kit.backfill import cli, dry_run, wait_for
from tests.kit.scheduler import produce
from tests.kit.timespec import brute_force_many, utc_ms
from tests.kit.worker import ChildProcess, SchedulerProcess
from topics.names import Settings
from topics.timefmt import format_ms, parse_instant

pytestmark = pytest.mark.broker

SHIFT_ONCE = {"gap": "shift", "fold": "once"}  # the default policy
SKIP_TWICE = {"gap": "skip", "fold": "twice"}

# schedule id -> zone, cron, DST policy. London's gap and fold are both 01:00-02:00
# local; New York's gap is 02:00-03:00 and its fold 01:00-02:00.
SCHEDULES: dict[str, tuple[str, str, dict[str, str]]] = {
    "ldn": ("Europe/London", "30 1 * * *", SHIFT_ONCE),
    "ldn-literal": ("Europe/London", "30 1 * * *", SKIP_TWICE),
    "nyc": ("America/New_York", "30 1,2 * * *", SHIFT_ONCE),
    "nyc-wild": ("America/New_York", "*/30 1-2 * * *", SHIFT_ONCE),
}


def _last_years_dst_range() -> tuple[int, int]:
    """March 1 to November 8 of last year (UTC): both zones' spring and fall
    transitions are inside (the last is the first Sunday of November, by the 7th)."""
    year = datetime.now(UTC).year - 1
    return utc_ms(f"{year}-03-01"), utc_ms(f"{year}-11-08")


def _upsert(schedule_id: str) -> bytes:
    zone, cron, dst = SCHEDULES[schedule_id]
    command: dict[str, Any] = {
        "v": 1,
        "type": "schedule.upsert",
        "id": schedule_id,
        "spec": {"cron": cron, "tz": zone},
        "dst": dst,
        "job": {"name": "test.noop", "args": {}},
    }
    return orjson.dumps(command)


def _local(zone: str, at_ms: int) -> str:
    return datetime.fromtimestamp(at_ms / 1000, ZoneInfo(zone)).strftime("%Y-%m-%d %H:%M:%S %z")


@pytest.mark.kafka_partitions(1)
async def test_a_dry_run_lists_the_brute_force_instants_across_both_dst_transitions(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    settings = kafka_settings
    from_ms, to_ms = _last_years_dst_range()
    for zone in ("Europe/London", "America/New_York"):
        offsets = [
            datetime.fromtimestamp(at / 1000, ZoneInfo(zone)).utcoffset()
            for at in (from_ms, (from_ms + to_ms) // 2, to_ms - 1)
        ]
        assert offsets[0] == offsets[2] != offsets[1], f"the range must cross both of {zone}'s"
    # The oracle first: it needs no broker, and one walk per zone judges its schedules.
    expected: dict[str, list[int]] = {}
    for zone in ("Europe/London", "America/New_York"):
        ids = [sid for sid, (z, _, _) in SCHEDULES.items() if z == zone]
        walked = brute_force_many(
            zone, [(SCHEDULES[sid][1], SCHEDULES[sid][2]) for sid in ids], from_ms, to_ms
        )
        expected.update(zip(ids, walked, strict=True))

    db = str(tmp_path / "h.db")
    recorder = ChildProcess(settings, tmp_path, "recorder", ["recorder", "--db", db])
    scheduler = SchedulerProcess(settings, tmp_path, "s1")
    procs = [recorder, scheduler]
    try:
        trigger = {"v": 1, "type": "schedule.trigger"}
        await produce(
            settings,
            [
                record
                for sid in SCHEDULES
                for record in (
                    (sid.encode(), _upsert(sid)),
                    # One run now, so the history knows the schedule (a plan refuses
                    # to guess about a schedule it has no record of).
                    (sid.encode(), orjson.dumps({**trigger, "id": sid})),
                )
            ],
        )
        window = ["--from", format_ms(from_ms), "--to", format_ms(to_ms), "--db", db]
        for sid, (zone, _cron, _dst) in SCHEDULES.items():

            async def planned(sid: str = sid) -> Any:
                lines = dry_run(settings, sid, *window, "--reprocess", "all")
                if lines is None or any(s["action"] == "unknown" for s in lines[:-1]):
                    return None  # the changelog or the recorder has not caught up yet
                return lines

            lines = await wait_for(f"{sid}'s plan", planned, 120, *procs)
            steps, totals = lines[:-1], lines[-1]
            ours = [parse_instant(s["scheduled_at"]) for s in steps]
            want = expected[sid]
            assert ours == want, (
                f"{sid}: only ours {sorted(set(ours) - set(want))[:5]}, "
                f"only the brute force's {sorted(set(want) - set(ours))[:5]}"
            )
            assert [s["local"] for s in steps] == [_local(zone, at) for at in want]
            assert {(s["action"], s["attempt"]) for s in steps} == {("run", 1)}
            assert totals["occurrences"] == totals["to_fire"] == len(want)

        # Without --reprocess all, the same range is older than what the history knows
        # of the schedule: refused before anything is planned, with the reason.
        code, out, err = cli(settings, "backfill", "ldn", *window, "--dry-run", "--json")
        assert code != 0 and out == ""
        assert "before the first run the history knows" in err
    finally:
        for proc in procs:
            proc.stop()
