"""Schedulers whose calendars follower cannot read (docs/DESIGN.md §5.7), on a real broker.

Six shards: a schedule that excludes the calendar "far" (a date in 2099: it fires
every second) and a plain every-second schedule on every shard, its own included,
run by two schedulers. Then ``{ns}.calendars`` is deleted, so no read of it can
succeed (as with a refused Read ACL or an offline partition): the calendar-naming
schedule fires no instant later than the deletion, the plain ones go on. The
scheduler owning the calendar-naming schedule's shard is killed (SIGKILL): the
survivor takes its shards over and every one goes live, the calendar-naming one's
too (after a few seconds' wait for the follower): its plain schedule fires, the
calendar-naming schedule stays held by the freshness rule, and the survivor's
metrics say how long the calendars have not been known fresh. Every
``(run_id, attempt)`` on the runs topic once.
"""

from __future__ import annotations

import asyncio
import re
import signal
import time
import urllib.request
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from actors.views.tail import read_to_end
from tests.kit.ports import free_port_block
from tests.kit.scheduler import produce, upsert
from tests.kit.worker import ChildProcess, now_ms
from topics.admin import admin_client, create_topics
from topics.calendar_commands import calendar_value
from topics.messages import Run, is_cancel, parse_run
from topics.names import Settings, TopicKind
from topics.partitioner import murmur2_partition

NAMED = "named-far"
SHARDS = 6


def _plain_ids() -> dict[int, str]:
    """A plain schedule's id on each shard (the calendar-naming schedule's included)."""
    found: dict[int, str] = {}
    for i in range(1000):
        sid = f"plain-{i}"
        found.setdefault(murmur2_partition(sid.encode(), SHARDS), sid)
    assert len(found) == SHARDS
    return found


async def _runs(settings: Settings) -> list[tuple[Run, int]]:
    records = await read_to_end(settings, settings.topic(TopicKind.RUNS))
    return [
        (parse_run(r.value), r.timestamp_ms)
        for r in records
        if r.value is not None and not is_cancel(r.value)
    ]


async def _until(
    what: Callable[[], object], children: list[ChildProcess], timeout_s: float = 120
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for child in children:
            child.check_alive()
        found = what()
        if asyncio.iscoroutine(found):
            found = await found
        if found:
            return
        await asyncio.sleep(0.5)
    logs = "\n".join(f"--- {c.name}\n{c.log()[-3000:]}" for c in children)
    raise AssertionError(f"never came:\n{logs}")


def _owned(child: ChildProcess) -> set[int]:
    """The shards a scheduler's log says it built (restored, or caught up from a
    standby) and has not dropped since."""
    owned: set[int] = set()
    for line in child.log().splitlines():
        restored = re.search(r"shard (\d+): .* (restored|caught up) in", line)
        dropped = re.search(r"shard (\d+) dropped", line)
        if restored:
            owned.add(int(restored.group(1)))
        elif dropped:
            owned.discard(int(dropped.group(1)))
    return owned


def _scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    found: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("kafkron_scheduler_calendars_"):
            name, value = line.rsplit(" ", 1)
            found[name] = float(value)
    return found


def _scheduler(settings: Settings, tmp: Path, name: str, port: int) -> ChildProcess:
    argv = ["scheduler", "--session-timeout-ms", "6000", "--heartbeat-ms", "1000"]
    return ChildProcess(settings, tmp, name, [*argv, "--metrics-port", str(port)])


@pytest.mark.kafka_partitions(SHARDS)
async def test_a_refused_follower_holds_calendar_schedules_and_the_others_fire(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    plain = _plain_ids()
    named_shard = murmur2_partition(NAMED.encode(), SHARDS)
    calendar = orjson.loads(calendar_value({"tz": "UTC", "dates": ["2099-01-01"]}))["calendar"]
    add_calendar = {"v": 1, "type": "calendar.upsert", "id": "far", "calendar": calendar}
    spec = {"any": [{"every": "1s"}], "exclude": ["far"]}
    port = free_port_block(2)
    schedulers = [
        _scheduler(kafka_settings, tmp_path, "scheduler-a", port),
        _scheduler(kafka_settings, tmp_path, "scheduler-b", port + 1),
    ]
    children = list(schedulers)
    try:
        await produce(kafka_settings, [(b"far", orjson.dumps(add_calendar))])
        await produce(
            kafka_settings,
            [(NAMED.encode(), upsert(NAMED, spec=spec))]
            + [(i.encode(), upsert(i)) for i in plain.values()],
        )

        def split() -> bool:
            a, b = (_owned(s) for s in schedulers)
            return len(a) == len(b) == SHARDS // 2 and not a & b

        await _until(split, children)

        async def all_fire_after(at_ms: int) -> bool:
            runs = await _runs(kafka_settings)
            return all(
                any(r.schedule_id == i and r.scheduled_ms > at_ms for r, _ in runs)
                for i in [NAMED, *plain.values()]
            )

        split_ms = now_ms()
        await _until(lambda: all_fire_after(split_ms), children)
        async with admin_client(kafka_settings) as admin:
            await admin.delete_topics([kafka_settings.topic(TopicKind.CALENDARS)])
        deleted_ms = now_ms()

        async def plains_fire_after(at_ms: int) -> bool:
            runs = await _runs(kafka_settings)
            return all(
                any(r.schedule_id == i and appended > at_ms for r, appended in runs)
                for i in plain.values()
            )

        await _until(lambda: plains_fire_after(deleted_ms + 4000), children)
        victim = next(s for s in schedulers if named_shard in _owned(s))
        survivor = next(s for s in schedulers if s is not victim)
        taken = _owned(victim)
        victim.signal(signal.SIGKILL)
        victim.proc.wait(timeout=30)
        children.remove(victim)
        killed_ms = now_ms()
        # The survivor restores every shard it takes over, the calendar-naming one's
        # too (the follower refused: live anyway); every plain schedule fires again,
        # the one beside the calendar-naming schedule included.
        await _until(lambda: plains_fire_after(killed_ms + 2000), children)
        assert taken <= _owned(survivor)
        assert "could not be read to their end" in survivor.log()
        await asyncio.sleep(3)
        figures = await asyncio.to_thread(_scrape, port if survivor is schedulers[0] else port + 1)
        assert figures["kafkron_scheduler_calendars_fresh_age_seconds"] >= 3
    finally:
        for child in schedulers:
            child.stop()
        await create_topics(kafka_settings, partitions=SHARDS)  # for the namespace's cleanup
    runs = await _runs(kafka_settings)
    named = [run for run, _ in runs if run.schedule_id == NAMED]
    assert named, "the calendar-naming schedule never fired before the deletion"
    # Known fresh at the latest when the topic was deleted: nothing later fired.
    assert max(r.scheduled_ms for r in named) <= deleted_ms
    counts = Counter((run.run_id, run.attempt) for run, _ in runs)
    assert [key for key, n in counts.items() if n > 1] == []
