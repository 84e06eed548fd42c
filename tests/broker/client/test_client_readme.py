"""The README's "From Python" program, run as a user would run it: copied out of the
README, against the real broker, with a scheduler and a billing worker running in a
fresh namespace. It schedules 100 one-off runs, waits for each and prints how each
ended; the one that always fails comes back dead-lettered.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path

from tests.kit.paths import REPO
from tests.kit.worker import ChildProcess, SchedulerProcess, WorkerProcess
from topics.names import Settings


def readme_program() -> str:
    """The first Python block of the README's "From Python" section."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## From Python\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert blocks, 'the README\'s "From Python" section has no Python block'
    return str(blocks[0])


def test_the_readme_program_is_found_and_complete() -> None:
    program = readme_program()
    compile(program, "from_python.py", "exec")  # a whole program, not a fragment
    assert "asyncio.run(main())" in program and "range(100)" in program


async def test_the_readme_program_schedules_100_runs_and_reports_each(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    script = tmp_path / "from_python.py"
    script.write_text(readme_program(), encoding="utf-8")
    billing = {"KAFKRON_BILLING_DB": str(tmp_path / "billing.db")}
    children: list[ChildProcess] = [
        SchedulerProcess(kafka_settings, tmp_path),
        WorkerProcess(
            kafka_settings, tmp_path, "w1", jobs="actors.examples.billing.jobs", env=billing
        ),
    ]
    env = {
        **os.environ,
        **billing,
        "KAFKRON_NAMESPACE": kafka_settings.namespace,
        "KAFKRON_BOOTSTRAP": kafka_settings.bootstrap,
    }
    env["PYTHONPATH"] = str(REPO)  # the tree under test, as an install of it would
    try:
        done = await asyncio.create_subprocess_exec(
            sys.executable,
            str(script),
            cwd=tmp_path,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        stdout, stderr = await asyncio.wait_for(done.communicate(), 400)
    finally:
        for child in children:
            child.stop()
    assert done.returncode == 0, stderr.decode()
    lines = stdout.decode().splitlines()
    statuses = {}
    for line in lines:
        if not line.startswith("  "):
            run, status = line.split(" ")
            statuses[run] = status
    assert len(statuses) == 100
    assert {status for run, status in statuses.items() if "fx-once-99@" not in run} == {"succeeded"}
    [dead] = [run for run in statuses if run.startswith("fx-once-99@")]
    assert statuses[dead] == "failed"
    assert [line for line in lines if line.startswith("  ")] == [
        f"  dead after 2 attempts: the card network is down (attempt 2 of run {dead})"
    ]
