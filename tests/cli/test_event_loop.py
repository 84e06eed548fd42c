"""The event loop a scheduler or worker runs on: asyncio's by default, uvloop when asked
for and installed, asyncio's (with a warning) when asked for and absent.

The dev extra installs uvloop, so CI runs both the uvloop path and, with its import
made to fail, the fallback every plain install takes.
"""

from __future__ import annotations

import asyncio
import logging
import sys

import pytest

from actors.cli.stop_deadline import run_main
from actors.event_loop import ASYNCIO, UVLOOP, chosen, loop_kind, new_event_loop


async def _kind_and_a_task() -> str:
    # Something of what a process does on its loop: a task, a timer, a callback.
    done = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().call_later(0.01, done.set_result, "ok")
    assert await asyncio.create_task(asyncio.wait_for(done, 5)) == "ok"
    return loop_kind(asyncio.get_running_loop())


def _run_on(name: str) -> str:
    seen: list[str] = []

    async def main() -> None:
        seen.append(await _kind_and_a_task())

    run_main(main(), new_loop=lambda: new_event_loop(name))
    return seen[0]


def test_the_default_is_asyncio_s_own_loop() -> None:
    assert chosen(None, {}) == ASYNCIO
    assert _run_on(chosen(None, {})) == ASYNCIO


def test_the_flag_wins_over_the_environment() -> None:
    assert chosen(UVLOOP, {"KAFKRON_LOOP": ASYNCIO}) == UVLOOP
    assert chosen(None, {"KAFKRON_LOOP": UVLOOP}) == UVLOOP
    assert chosen(ASYNCIO, {"KAFKRON_LOOP": UVLOOP}) == ASYNCIO


def test_an_unknown_loop_in_the_environment_is_refused() -> None:
    with pytest.raises(ValueError, match="KAFKRON_LOOP='tokio'"):
        chosen(None, {"KAFKRON_LOOP": "tokio"})


def test_uvloop_is_selected_when_installed() -> None:
    import uvloop  # the dev extra installs it: CI fails here, never skips, without it

    loop = new_event_loop(UVLOOP)
    try:
        assert isinstance(loop, uvloop.Loop)
    finally:
        loop.close()
    assert _run_on(UVLOOP) == UVLOOP


def test_asked_for_uvloop_without_it_the_process_runs_on_asyncio(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # None in sys.modules: importing it raises ImportError, as where it is not installed.
    monkeypatch.setitem(sys.modules, "uvloop", None)
    with caplog.at_level(logging.WARNING, logger="kafkron"):
        assert _run_on(UVLOOP) == ASYNCIO
    assert "uvloop is not installed" in caplog.text
