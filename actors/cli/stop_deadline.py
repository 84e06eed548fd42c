"""A deadline on a graceful stop, kept by a thread the event loop cannot hold up.

Every close in kafkron is bounded (``topics.closing``), so a stop normally ends
well within its budget. This is the backstop for what bounding a single await
cannot reach: an event loop blocked in a synchronous call, a task that swallows
its cancellation, or a sequence of bounded steps whose sum outlasts the
supervisor's patience (Kubernetes sends SIGKILL 30 s after SIGTERM by default).

Past the deadline the process logs what each of its tasks was waiting on (so the
next hang names its cause), then exits at once with `EXIT_STOP_OVERRAN`, without
unwinding: ``asyncio.run`` would cancel every task and wait for them, which is the
very wait that did not end. Exiting hard is as safe as ``kill -9``, which kafkron
is built to survive: fencing and the broker's session and transaction timeouts
settle whatever the process left open.
"""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import logging
import os
import sys
import threading
from collections.abc import Callable, Coroutine
from typing import Any

log = logging.getLogger("kafkron")

EXIT_STOP_OVERRAN = 3  # not 0: the stop was not clean; not 1: nothing was refused

_LAST_RESORT_S = 5.0
SETTLE_S = 5.0  # how long the tasks left at the end get to finish once cancelled
_CHAIN_LIMIT = 24  # awaits shown per task: enough to reach the one it hangs on


class StopDeadline:
    """Arm once a stop is asked for; if the process has not ended ``deadline_s`` later,
    log every task's stack and call ``exit`` (``os._exit`` outside tests)."""

    def __init__(
        self,
        what: str,
        deadline_s: float,
        exit_now: Callable[[int], None] = os._exit,
    ) -> None:
        if deadline_s <= 0:
            raise ValueError(f"deadline_s must be positive, got {deadline_s}")
        self.what = what
        self.deadline_s = deadline_s
        self._exit_now = exit_now
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: threading.Timer | None = None
        self._last: threading.Timer | None = None

    @property
    def armed(self) -> bool:
        return self._timer is not None

    def arm(self) -> None:
        """Start the countdown (idempotent: a second signal does not extend it)."""
        if self._timer is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._timer = threading.Timer(self.deadline_s, self._expire)
        # The last resort, should the first block on a stderr nobody reads: no logging.
        self._last = threading.Timer(self.deadline_s + _LAST_RESORT_S, self._exit_quietly)
        for timer in (self._timer, self._last):
            timer.daemon = True  # never keeps a process that did stop alive
            timer.start()

    def disarm(self) -> None:
        """Cancel the countdown. The commands never call it: a process that returned
        from its main coroutine may still hang in the interpreter's exit (a job's
        thread joined, a task that will not end), and the deadline covers that too."""
        timers, self._timer, self._last = (self._timer, self._last), None, None
        for timer in timers:
            if timer is not None:
                timer.cancel()

    def _exit_quietly(self) -> None:
        self._exit_now(EXIT_STOP_OVERRAN)

    def _expire(self) -> None:
        log.error(
            "%s did not stop within %.0f s of being asked to; exiting now (code %d)."
            " What each task was waiting on:",
            self.what,
            self.deadline_s,
            EXIT_STOP_OVERRAN,
        )
        for line in self._task_stacks():
            log.error("  %s", line)
        with contextlib.suppress(OSError, ValueError):  # stderr may be gone
            faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        for handler in logging.getLogger().handlers + log.handlers:
            with contextlib.suppress(OSError, ValueError):  # stderr may be gone
                handler.flush()
        self._exit_now(EXIT_STOP_OVERRAN)

    def _task_stacks(self) -> list[str]:
        loop = self._loop
        if loop is None:
            return []
        # Read from another thread while the loop may be running: the task set may
        # change under us; a few tries, and a partial answer is still an answer.
        for _ in range(3):
            try:
                tasks = list(asyncio.all_tasks(loop))
                break
            except RuntimeError:
                continue
        else:
            return ["(the task list kept changing)"]
        return [f"{task.get_name()}: {' -> '.join(_awaiting(task)) or 'done'}" for task in tasks]


def _awaiting(task: asyncio.Task[object]) -> list[str]:
    """The chain of awaits a task is suspended in, outermost first.

    ``Task.get_stack`` shows a suspended task's outermost frame only; the await
    it hangs on is at the end of ``cr_await``.
    """
    chain: list[str] = []
    awaited: object = task.get_coro()
    for _ in range(_CHAIN_LIMIT):
        if awaited is None:
            break
        frame = getattr(awaited, "cr_frame", None) or getattr(awaited, "gi_frame", None)
        if frame is None:
            chain.append(type(awaited).__name__)  # a Future, a Task, an awaitable object
            break
        code = frame.f_code
        chain.append(f"{code.co_name} ({os.path.basename(code.co_filename)}:{frame.f_lineno})")
        awaited = getattr(awaited, "cr_await", None) or getattr(awaited, "gi_yieldfrom", None)
    return chain


def run_main(
    main: Coroutine[Any, Any, None],
    settle_s: float = SETTLE_S,
    new_loop: Callable[[], asyncio.AbstractEventLoop] = asyncio.new_event_loop,
) -> None:
    """``asyncio.run(main)`` without its unbounded wait at the end, on a loop made by
    ``new_loop`` (`actors.event_loop`: asyncio's own or uvloop).

    ``asyncio.run`` cancels the tasks still pending when ``main`` returns and waits
    for every one of them: a close that `topics.closing.bounded` abandoned because it
    would not end is then awaited again, forever. Here they get ``settle_s`` and are
    left behind (the process is about to exit). Raises what ``main`` raises.
    """
    loop = new_loop()
    try:
        loop.run_until_complete(main)
    finally:
        try:
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.wait(pending, timeout=settle_s))
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()
