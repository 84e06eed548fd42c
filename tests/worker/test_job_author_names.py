"""Job authors' names come from one documented place, ``kafkron`` (the README's
"Workers" section), and ``actors`` still exports the same objects for programs
written before it. A job module written with them loads as a worker loads
``--jobs`` modules, and each name does its work there: ``NonRetryable`` ends an
attempt non-retryable, ``RunCancelled`` from ``ctx.heartbeat()`` ends it cancelled.
"""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from tests.kit.paths import REPO

NAMES = ("job", "RunContext", "NonRetryable", "RunCancelled", "CANCELLED_ERROR")


@pytest.mark.parametrize("name", NAMES)
def test_each_name_imports_from_kafkron_and_from_actors_as_one_object(name: str) -> None:
    kafkron = importlib.import_module("kafkron")
    actors = importlib.import_module("actors")
    assert getattr(kafkron, name) is getattr(actors, name)
    assert name in kafkron.__all__ and name in actors.__all__


def test_the_cancelled_error_type_is_the_one_the_worker_and_the_shard_write() -> None:
    from actors.shard.cancel import CANCELLED_ERROR as SHARD_WRITES
    from kafkron import CANCELLED_ERROR

    assert CANCELLED_ERROR == SHARD_WRITES == "Cancelled"


# A fresh interpreter: the job module is imported the way `kafkron worker --jobs`
# imports it, into an empty registry, and each job runs on the worker's executor.
_PROBE = """
import asyncio, json
from actors.worker.executor import Executor
from actors.worker.registry import load_job_modules
from topics.command_types import Job
from topics.messages import idempotency_key, parse_run, run_id_for, run_value

registry = load_job_modules(["tests.jobs.authors"])
exits = {}

def run(name, offset):
    run_id = run_id_for(f"s{offset}", 1_790_000_000_000)
    return (0, offset, 1), parse_run(run_value(
        run_id=run_id, schedule_id=f"s{offset}", task=None, scheduled_ms=1_790_000_000_000,
        fired_ms=1_790_000_000_000, attempt=1, job=Job(name, {}),
        idempotency_key=idempotency_key(run_id), deadline_ms=1_790_000_060_000))

async def main():
    executor = Executor(registry, threads=2, worker="w",
                        on_exit=lambda key, outcome: exits.__setitem__(key[1], outcome))
    for offset, name in enumerate(registry.names()):
        executor.start(*run(name, offset))
    await asyncio.sleep(0.2)
    executor.cancel((0, registry.names().index("authors.loop_until_cancelled"), 1), "asked")
    for _ in range(200):
        if len(exits) == len(registry.names()):
            break
        await asyncio.sleep(0.01)
    await executor.close()

asyncio.run(main())
names = registry.names()
print(json.dumps({names[i]: [o.status, o.error] for i, o in sorted(exits.items())}))
"""


def test_a_job_module_written_with_them_loads_and_runs_in_a_worker() -> None:
    import json

    done = subprocess.run(
        [sys.executable, "-c", _PROBE],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "authors.charge": [
            "failed",
            {"type": "NonRetryable", "message": "AccountDeleted: customer c-1 on attempt 1"},
        ],
        "authors.greet": ["succeeded", None],
        "authors.loop_until_cancelled": [
            "cancelled",
            {"type": "RunCancelled", "message": "stopped: asked"},
        ],
    }
