"""A stop that never ends: the process still exits, and says what it was waiting on.

After a broker lost its disk, one scheduler did not exit within 60 s of SIGTERM
(every close is bounded, but one after another they outlasted the wait). The
processes now run their closes at once and keep a deadline on the whole stop in a
thread the event loop cannot hold up. Here the runtime's ``run`` is replaced by one
that ignores its stop event and swallows every cancellation, the worst case: with no
deadline the process never exits (these tests then fail on their timeout).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import threading

import pytest

from actors.cli.stop_deadline import EXIT_STOP_OVERRAN, StopDeadline, run_main
from tests.kit.paths import REPO as ROOT


async def _hangs_until(release: asyncio.Event) -> None:
    while not release.is_set():
        try:
            await release.wait()
        except asyncio.CancelledError:
            continue  # the worst kind of task: it swallows its cancellation


def test_past_the_deadline_it_exits_and_names_what_each_task_awaited(
    caplog: pytest.LogCaptureFixture,
) -> None:
    exited: list[int] = []
    called = threading.Event()

    def exit_now(code: int) -> None:
        exited.append(code)
        called.set()

    async def main() -> None:
        release = asyncio.Event()
        task = asyncio.create_task(_hangs_until(release), name="stuck-close")
        await asyncio.sleep(0)
        task.cancel()  # it swallows this
        deadline = StopDeadline("the test process", 0.05, exit_now)
        deadline.arm()
        while not called.is_set():
            await asyncio.sleep(0.01)
        release.set()
        await task

    with caplog.at_level(logging.ERROR, logger="kafkron"):
        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(asyncio.wait_for(main(), 10))
        finally:
            loop.close()
    assert exited == [EXIT_STOP_OVERRAN]
    text = caplog.text
    assert "the test process did not stop within 0 s" in text
    assert "stuck-close: _hangs_until" in text
    assert "Event" in text or "Future" in text  # the await it hangs on


def test_a_stop_that_ends_in_time_is_disarmed_and_never_exits() -> None:
    exited: list[int] = []

    async def main() -> None:
        deadline = StopDeadline("the test process", 0.05, exited.append)
        deadline.arm()
        deadline.arm()  # a second signal does not start a second countdown
        deadline.disarm()
        assert not deadline.armed
        await asyncio.sleep(0.2)

    asyncio.run(main())
    assert exited == []


def test_the_tasks_left_at_the_end_are_given_a_bound_not_awaited_forever() -> None:
    """asyncio.run cancels what is left when main returns and awaits it: an abandoned
    close that swallows its cancellation would be awaited forever there."""
    release: list[asyncio.Event] = []
    left: list[asyncio.Task[None]] = []

    async def main() -> None:
        release.append(asyncio.Event())
        left.append(asyncio.create_task(_hangs_until(release[0]), name="abandoned-close"))
        await asyncio.sleep(0)

    run_main(main(), settle_s=0.05)  # returns: the test would hang otherwise
    assert not left[0].done()  # left behind, as the exiting process leaves it


def test_a_deadline_must_be_positive() -> None:
    with pytest.raises(ValueError, match="deadline_s must be positive"):
        StopDeadline("x", 0)


# The CLI's own _serve, with the runtime's run replaced by one that never ends.
_PROGRAM = """
import asyncio
from actors.cli import {kind}_cmd as cmd
from actors.cli.stop_deadline import run_main
from actors.{kind} import runtime as rt
from topics.names import Settings
{imports}

async def never_stops(self, stop):
    print("ready", flush=True)
    while True:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            continue

rt.{runtime}.run = never_stops
cmd.{stop_s} = 1.0
run_main(cmd._serve({open}rt.{runtime}(Settings.from_env(), {arguments}){close}, None))
"""


def _program(
    kind: str, runtime: str, stop_s: str, arguments: str, imports: str = "", listed: bool = False
) -> str:
    """The program serving `kind` with `runtime` (built from the environment's settings
    and `arguments`; in a list if `listed`: a worker serves one runtime per queue), its
    stop budget `stop_s` shortened to one second."""
    return _PROGRAM.format(
        kind=kind,
        runtime=runtime,
        stop_s=stop_s,
        arguments=arguments,
        imports=imports,
        open="[" if listed else "",
        close="]" if listed else "",
    )


_SCHEDULER = _program("scheduler", "SchedulerRuntime", "STOP_DEADLINE_S", "rt.RuntimeOptions()")
_WORKER = _program(
    "worker",
    "WorkerRuntime",
    "STOP_AFTER_DRAIN_S",
    "Registry(), rt.WorkerOptions(drain_s=0.5)",
    imports="from actors.worker.registry import Registry",
    listed=True,
)


@pytest.mark.parametrize("process", [_SCHEDULER, _WORKER], ids=["scheduler", "worker"])
def test_a_process_whose_stop_hangs_exits_with_code_3(process: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", process],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"

        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    _, stderr = proc.communicate()
    assert code == EXIT_STOP_OVERRAN, stderr
    assert "did not stop within" in stderr
    assert "never_stops" in stderr  # the task that held the stop up is named
