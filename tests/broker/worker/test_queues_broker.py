"""Worker queues on a real broker: runs land only on the workers of their queue; a
queue no worker serves is timed out by the shard; a queue with no topic fails visibly,
and the shard's other work goes on.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from actors.observe.metrics import QUEUE_OLDEST_AGE, QUEUE_WORKERS
from actors.observe.queue_age import QueueAgeSampler
from actors.sending import encode, send_commands
from actors.shard.runs import QUEUE_REFUSED_ERROR
from actors.views.queues import queue_states
from actors.views.tail import read_to_end
from actors.web.app import Console, WebOptions
from tests.kit.worker import (
    REPO,
    ChildProcess,
    SchedulerProcess,
    WorkerProcess,
    marks,
    now_ms,
    wait_for_results,
)
from topics.messages import Result, is_cancel, parse_run
from topics.names import Settings, TopicKind
from topics.queue_topics import check_with_queues, create_queue_topics
from topics.timefmt import format_ms

PER_QUEUE = 6


def _upsert(schedule_id: str, queue: str, **fields: Any) -> tuple[bytes, bytes]:
    command = {
        "v": 1,
        "type": "schedule.upsert",
        "id": schedule_id,
        "spec": {"at": format_ms(now_ms() + 2_000)},
        "job": {"name": "test.sleep", "args": {"seconds": 0.05}, "queue": queue},
        **fields,
    }
    return encode(command, now_ms())


def _cli(settings: Settings, *argv: str) -> str:
    env = {
        **os.environ,
        "KAFKRON_NAMESPACE": settings.namespace,
        "KAFKRON_BOOTSTRAP": settings.bootstrap,
        "PYTHONPATH": str(REPO),
    }
    done = subprocess.run(
        [sys.executable, "-m", "actors.cli", *argv],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout


async def _runs_on(settings: Settings, queue: str) -> list[str]:
    topic = settings.for_queue(queue).topic(TopicKind.RUNS)
    records = await read_to_end(settings, topic)
    return sorted(
        parse_run(r.value).run_id for r in records if r.value is not None and not is_cancel(r.value)
    )


async def test_runs_go_only_to_their_queues_workers_and_an_unserved_queue_times_out(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    settings = kafka_settings
    assert len(await create_queue_topics(settings, ["alpha", "beta", "idle"], 3)) == 3
    assert await check_with_queues(settings, queues=["alpha", "beta", "idle"]) == []
    assert any("runs.nope" in p for p in await check_with_queues(settings, queues=["nope"]))
    children: list[ChildProcess] = [
        SchedulerProcess(settings, tmp_path),
        WorkerProcess(settings, tmp_path, "wa", extra_args=("--queue", "alpha")),
        WorkerProcess(settings, tmp_path, "wb", extra_args=("--queue", "beta")),
        # The history follows every queue's topic (a pattern), "idle" included.
        ChildProcess(settings, tmp_path, "recorder", ["recorder", "--db", str(tmp_path / "h.db")]),
    ]
    try:
        commands = [_upsert(f"a-{i}", "alpha") for i in range(PER_QUEUE)]
        commands += [_upsert(f"b-{i}", "beta") for i in range(PER_QUEUE)]
        # Nobody serves "idle": its run waits on its topic until the shard's deadline.
        retry = {"max_attempts": 1}
        commands.append(_upsert("idle-0", "idle", timeout_s=2, retry=retry))
        # No topic for "nope": the attempt fails at once, the turn commits the rest.
        commands.append(_upsert("nope-0", "nope", retry=retry))
        await send_commands(settings, commands)

        def served(found: list[Result]) -> bool:
            ended = {r.schedule_id for r in found}
            return len(ended - {"idle-0"}) == 2 * PER_QUEUE + 1

        await wait_for_results(settings, served, timeout_s=150, workers=children)
        # While the idle queue's run waits (its deadline plus the margin is ~32 s off):
        # the queues' view, `kafkron ls` and the scheduler's metric say so.
        states = {q.queue: q for q in await queue_states(settings)}
        assert states["idle"].workers == 0 and states["idle"].open_runs >= 1
        assert states["idle"].oldest_open_ms is not None
        assert states["alpha"].workers == 1 and states["beta"].workers == 1
        assert states["default"].workers == 0  # nothing started on {ns}.runs
        listing = _cli(settings, "ls")
        assert "no worker serves queue idle" in listing, listing
        assert "test.sleep (queue alpha)" in listing, listing
        for _ in range(60):  # the recorder records the idle run as fired, no result yet
            shown = json.loads(
                _cli(settings, "history", "idle-0", "--db", str(tmp_path / "h.db"), "--json")
            )
            if shown:
                break
            await asyncio.sleep(0.5)
        assert [(r["status"], r["attempts"]) for r in shown] == [("running", 1)], shown
        console = Console(settings, WebOptions(db=tmp_path / "h.db", token="t"))
        async with TestClient(TestServer(console.app())) as web:
            page = await (await web.get("/")).text()
        assert 'data-queue="idle"' in page and "0: no worker serves it" in page, page
        assert "no worker serves queue idle" in page and "test.sleep (queue beta)" in page
        sampler = QueueAgeSampler(settings)
        await sampler.refresh()
        families = {f.name: f for f in sampler.collect()}
        ages = {s.labels["queue"]: s.value for s in families[QUEUE_OLDEST_AGE].samples}
        assert ages["idle"] > 0
        workers = {s.labels["queue"]: s.value for s in families[QUEUE_WORKERS].samples}
        assert (workers["idle"], workers["alpha"]) == (0, 1)

        def done(found: list[Result]) -> bool:
            ended = {r.schedule_id for r in found}
            return len(ended) == 2 * PER_QUEUE + 2

        found = await wait_for_results(settings, done, timeout_s=150, workers=children)
        by_id = {r.schedule_id: r for r in found}
        for i in range(PER_QUEUE):
            assert (by_id[f"a-{i}"].status, by_id[f"a-{i}"].worker) == ("succeeded", "wa")
            assert (by_id[f"b-{i}"].status, by_id[f"b-{i}"].worker) == ("succeeded", "wb")
        idle = by_id["idle-0"]
        assert idle.status == "timed_out" and idle.worker.startswith("shard-")
        nope = by_id["nope-0"]
        assert nope.status == "failed" and nope.error is not None
        assert nope.error["type"] == QUEUE_REFUSED_ERROR
        # Each job ran on its own queue's worker, once; none of the idle queue's.
        started = [
            (run_id.split("@")[0], worker)
            for e, run_id, _, worker in marks(tmp_path)
            if e == "start"
        ]
        assert sorted(started) == sorted(
            [(f"a-{i}", "wa") for i in range(PER_QUEUE)]
            + [(f"b-{i}", "wb") for i in range(PER_QUEUE)]
        )
        # The records are on their queues' topics and nowhere else.
        assert [r.split("@")[0] for r in await _runs_on(settings, "alpha")] == sorted(
            f"a-{i}" for i in range(PER_QUEUE)
        )
        assert [r.split("@")[0] for r in await _runs_on(settings, "idle")] == ["idle-0"]
        assert await _runs_on(settings, "default") == []
    finally:
        for child in children:
            child.stop()
