"""The README's Faust app runs as the README says, from its text alone.

The test writes the section's ``results_app.py`` block to a file of its own, starts
it with the section's command line (the namespace swapped for the test's) in a
child process, and feeds its results topic a failure, a record that is not JSON, a
progress report and a success. Checked: the app prints the two outcomes with the
counts the README promises, skips the progress report, logs the bad record once
and carries on; its data folder is where the README puts it; Ctrl-C stops it with
its offsets committed past every record.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

from aiokafka import AIOKafkaProducer

from tests.kit.faust_readme import code_block
from tests.kit.paths import REPO
from topics import messages
from topics.admin import admin_client
from topics.names import Settings, TopicKind
from topics.vocabulary import RunStatus

T0 = 1_790_000_000_000
RUN_ID = messages.run_id_for("pay", T0)


def _result(attempt: int, status: RunStatus, **optional: object) -> bytes:
    return messages.result_value(
        run_id=RUN_ID,
        schedule_id="pay",
        task=None,
        attempt=attempt,
        status=status,
        scheduled_ms=T0,
        started_ms=T0 + 10,
        finished_ms=None if status is RunStatus.RUNNING else T0 + 20,
        worker="w1",
        error={"type": "E", "message": "m"} if status is RunStatus.FAILED else None,
        progress=({"rows": 1}, T0 + 15) if status is RunStatus.RUNNING else None,
    )


RECORDS = [
    _result(1, RunStatus.FAILED),
    b"\x00not json",
    _result(2, RunStatus.RUNNING),
    _result(2, RunStatus.SUCCEEDED),
]


async def _produce(settings: Settings) -> int:
    """Produce RECORDS under the key ``pay`` (one partition, in order); that partition."""
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap)
    await producer.start()
    try:
        partitions = {
            (
                await producer.send_and_wait(settings.topic(TopicKind.RESULTS), value, b"pay")
            ).partition
            for value in RECORDS
        }
    finally:
        await producer.stop()
    assert len(partitions) == 1
    return int(partitions.pop())


def _command() -> list[str]:
    """The README's command line, run with this interpreter."""
    words = shlex.split(code_block("KAFKRON_NAMESPACE=").replace("\\\n", " "))
    words = [word for word in words if "=" not in word]  # the environment, set below
    assert words[:2] == ["python", "results_app.py"], words
    return [sys.executable, *words[1:]]


async def _committed(settings: Settings, group: str) -> dict[int, int]:
    async with admin_client(settings) as admin:
        offsets = await admin.list_consumer_group_offsets(group)
    results = settings.topic(TopicKind.RESULTS)
    return {tp.partition: meta.offset for tp, meta in offsets.items() if tp.topic == results}


async def test_the_readme_app_runs_as_written(kafka_settings: Settings, tmp_path: Path) -> None:
    settings = kafka_settings
    app_id = f"{settings.namespace}-results-app"  # as the README's app names itself
    (tmp_path / "results_app.py").write_text(code_block("# results_app.py"), encoding="utf-8")
    partition = await _produce(settings)
    env = {
        **os.environ,
        "KAFKRON_NAMESPACE": settings.namespace,
        "KAFKRON_BOOTSTRAP": settings.bootstrap,
        "PYTHONPATH": str(REPO),
    }
    log_path = tmp_path / "app.log"
    with log_path.open("wb") as log:
        app = subprocess.Popen(
            _command(), cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT
        )
    try:
        last = f"{RUN_ID} attempt 2: succeeded (1 failed, 1 bad records)"
        deadline = time.monotonic() + 90
        while last not in log_path.read_text(errors="replace"):
            assert app.poll() is None, f"the app exited {app.returncode}:\n{log_path.read_text()}"
            assert time.monotonic() < deadline, f"never printed {last!r}:\n{log_path.read_text()}"
            await asyncio.sleep(0.2)
        app.send_signal(signal.SIGINT)  # Ctrl-C
        stopped = app.wait(60)
        committed = await _committed(settings, app_id)
    finally:
        if app.poll() is None:
            app.kill()
            app.wait()
        async with admin_client(settings) as admin:
            own = [name for name in await admin.list_topics() if name.startswith(app_id)]
            if own:
                await admin.delete_topics(own)

    output = log_path.read_text(errors="replace")
    printed = [line.split("] ", 3)[-1].strip() for line in output.splitlines() if RUN_ID in line]
    assert printed == [
        f"{RUN_ID} attempt 1: failed (1 failed, 0 bad records)",
        f"{RUN_ID} attempt 2: succeeded (1 failed, 1 bad records)",
    ], output
    bad = f"skipping undecodable record {settings.topic(TopicKind.RESULTS)}[{partition}]@1 (value)"
    assert output.count(bad) == 1, output
    assert "Crashed" not in output, output
    assert stopped == 0, output
    assert (tmp_path / "results-app-data" / "v1" / "tables").is_dir()
    assert committed[partition] == len(RECORDS), committed
