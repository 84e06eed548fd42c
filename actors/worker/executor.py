"""Run job functions: async ones as tasks on the loop, sync ones in a thread pool,
inline ones (``@job(name, inline=True)``) on the loop as they start.

The executor does not decide how many jobs run (the core does); it starts what it
is told, turns how the function ended into an ``Outcome``, and reports the exit on
the event loop's thread through ``on_exit`` (or ``on_exits``, a turn's exits in one
call). It reports each started job exactly
once, and only when the job has really stopped: a sync job asked to stop keeps its
thread (Python cannot kill one) until it returns or calls ``ctx.heartbeat()``.

Per run the loop's own machinery is most of a no-op job's cost, so the exits of
async and inline jobs are reported in one callback per turn of the loop (not one
done callback per task), and an inline job has neither a task nor a thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import inspect
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from actors.observe import metrics
from actors.worker.context import RunContext
from actors.worker.core import Outcome, RunKey
from actors.worker.errors import NON_RETRYABLE_TYPE, RunCancelled, error_of, utf8_text
from actors.worker.registry import JobSpec, Registry
from topics.messages import Run
from topics.vocabulary import RunStatus

log = logging.getLogger("kafkron.worker")

ExitCallback = Callable[[RunKey, Outcome], None]
ExitsCallback = Callable[[list[tuple[RunKey, Outcome]]], None]
"""The exits of one turn of the loop, in the order they ended (``on_exits``)."""
CLOSE_WAIT_S = 10.0
"""How long ``close`` waits for cancelled async jobs to end."""
ProgressReport = Callable[[RunKey, Any, int], None]
"""``(key, details, at_ms)`` of a job's ``ctx.heartbeat(details)``, on the loop's thread."""


def _cancelled_outcome(reason: str) -> Outcome:
    message = utf8_text(reason) if type(reason) is str and reason else "cancelled"
    return Outcome(RunStatus.CANCELLED, {"type": "RunCancelled", "message": message})


AWAITABLE_RETURNED = Outcome(
    RunStatus.FAILED,
    {
        "type": NON_RETRYABLE_TYPE,
        "message": "TypeError: the job returned an awaitable (a coroutine, a task or a"
        " future): register the async function itself",
    },
)
"""A job whose call returned an awaitable (a plain wrapper of an async function
without ``functools.wraps``, an async job returning a coroutine or a task): it did
not succeed, and another attempt would do the same (a registration bug), so it is
not retried."""


def _awaitable_returned(result: Any) -> Outcome:
    # A coroutine is closed (its work never ran; no "never awaited" warning); a task
    # or a future is cancelled: left running, its work would go on unwatched, beside
    # whatever the run's outcome lets happen next.
    for stop in ("close", "cancel"):
        method = getattr(result, stop, None)
        if method is not None:
            with contextlib.suppress(BaseException):
                method()
            break
    return AWAITABLE_RETURNED


SUCCEEDED = Outcome(RunStatus.SUCCEEDED)  # frozen: one for every job that returned


async def _call_builtin(spec: JobSpec, ctx: RunContext, run: Run) -> Outcome:
    """A built-in job (a target's carrier) as a task on the loop: it reports its own
    outcome; what it raises is mapped as for any async job."""
    try:
        outcome: Outcome = await spec.func(run)
    except asyncio.CancelledError:
        if ctx.cancelled:
            raise
        return _stray_cancel()
    except BaseException as exc:
        return Outcome(RunStatus.FAILED, error_of(exc))
    return outcome


def _stray_cancel() -> Outcome:
    """A ``CancelledError`` the worker did not ask for (a library's own cancel, an
    awaited future cancelled by someone else): a failure, retried like any other,
    not a ``cancelled`` attempt, which is final."""
    return Outcome(
        RunStatus.FAILED,
        {
            "type": "CancelledError",
            "message": "the job was cancelled by something other than the worker",
        },
    )


def _call_sync(spec: JobSpec, ctx: RunContext, args: Mapping[str, Any]) -> Outcome:
    """Runs in a pool thread: the whole job, and the mapping of its ending."""
    try:
        result = spec.func(ctx, **args)
    except RunCancelled as exc:
        return _cancelled_outcome(exc.reason)
    except BaseException as exc:  # a job's SystemExit must not take the worker down
        return Outcome(RunStatus.FAILED, error_of(exc))
    if result is not None and inspect.isawaitable(result):
        return _awaitable_returned(result)
    return SUCCEEDED


class Executor:
    """Starts and cancels jobs; ``threads`` bounds the sync jobs running at once."""

    def __init__(
        self,
        registry: Registry,
        *,
        threads: int,
        worker: str,
        on_exit: ExitCallback | None = None,
        on_progress: ProgressReport | None = None,
        on_exits: ExitsCallback | None = None,
    ) -> None:
        """Exits are reported to ``on_exits`` (a turn's exits in one call) if given,
        else to ``on_exit`` one by one."""
        if (on_exit is None) == (on_exits is None):
            raise ValueError("give one of on_exit and on_exits")
        self._registry = registry
        self._worker = worker
        self._on_exit = on_exit
        self._on_exits = on_exits
        self._on_progress = on_progress
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=max(1, threads), thread_name_prefix="kafkron-job"
        )
        self._contexts: dict[RunKey, RunContext] = {}
        self._tasks: dict[RunKey, asyncio.Task[None]] = {}
        # key -> (job name, perf_counter at start): the job-duration metric's inputs.
        self._started: dict[RunKey, tuple[str, float]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop of the first start
        self._ended: list[tuple[RunKey, Outcome]] = []  # exits not reported yet
        self._reporting = False  # a `_report_ended` is scheduled

    def start(self, key: RunKey, run: Run) -> None:
        spec = self._registry.get(run.job.name)
        if spec is None:  # the core checks names first; a registry change is a bug
            raise LookupError(f"job {run.job.name!r} is not registered")
        loop = self._loop
        if loop is None or loop.is_closed():  # asked once: each ask costs a getpid() call
            loop = self._loop = asyncio.get_running_loop()
        on_progress = None
        if self._on_progress is not None:

            def on_progress(details: Any, at_ms: int) -> None:  # from any thread
                with contextlib.suppress(RuntimeError):  # the loop closed: no one to tell
                    loop.call_soon_threadsafe(self._progress, key, details, at_ms)

        ctx = RunContext(run, worker=self._worker, on_progress=on_progress)
        self._contexts[key] = ctx
        self._started[key] = (run.job.name, time.perf_counter())
        args = run.job.args
        if spec.is_async:
            coro = self._run_async(key, spec, ctx, run)
            self._tasks[key] = loop.create_task(coro)
            return
        if spec.inline:  # on the loop, now: no thread, no task (`@job(inline=True)`)
            try:
                outcome = _call_sync(spec, ctx, args)
            except BaseException as exc:  # a job's own bug must not raise out of `start`
                outcome = Outcome(RunStatus.FAILED, error_of(exc))
            self._report(key, outcome, loop)
            return
        future = self._pool.submit(_call_sync, spec, ctx, args)

        def done(fut: concurrent.futures.Future[Outcome]) -> None:
            # A job that outlives the worker's loop (a sync job never asked to stop
            # returns after shutdown) has no one left to report to.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._sync_exited, key, fut)

        future.add_done_callback(done)

    def failed_to_start(self, key: RunKey, exc: BaseException) -> None:
        """``start`` raised for ``key`` (a bug): its exit is reported failed from the
        next turn like any other, so the core frees its slot and finishes its offset."""
        loop = self._loop
        if loop is None:  # the first start raised before asking for the loop
            loop = self._loop = asyncio.get_running_loop()
        self._report(key, Outcome(RunStatus.FAILED, error_of(exc)), loop)

    async def _run_async(self, key: RunKey, spec: JobSpec, ctx: RunContext, run: Run) -> None:
        """An async job's task: the job, then its exit reported with the others that
        ended in this turn of the loop (`_report`), with no done callback of its own.

        A task cancelled before its first step never runs a line of this coroutine;
        the worker's own cancel propagates out of it. Both are reported by the done
        callback that `cancel` adds: whichever of the two reports pops the task
        first, so each job's exit is reported exactly once.
        """
        try:
            if spec.builtin:
                outcome = await _call_builtin(spec, ctx, run)
            else:
                # The job's own ending mapped here, not in a coroutine of its own:
                # a no-op job's cost is mostly such machinery (one coroutine per run).
                try:
                    result = await spec.func(ctx, **run.job.args)
                    if result is not None and inspect.isawaitable(result):
                        outcome = _awaitable_returned(result)
                    else:
                        outcome = SUCCEEDED
                except RunCancelled as exc:
                    outcome = _cancelled_outcome(exc.reason)
                except asyncio.CancelledError:
                    if ctx.cancelled:
                        raise  # the worker's own cancel: to the outer handler
                    outcome = _stray_cancel()
        except asyncio.CancelledError:
            raise  # the worker's cancel: reported by the callback `cancel` added
        except BaseException as exc:  # as for sync jobs: a job's SystemExit must not end
            outcome = Outcome(RunStatus.FAILED, error_of(exc))  # the worker
        if self._tasks.pop(key, None) is not None:
            self._report(key, outcome, self._loop)

    def _report(
        self, key: RunKey, outcome: Outcome, loop: asyncio.AbstractEventLoop | None
    ) -> None:
        """Report an exit from the next turn of the loop, in one callback for every
        exit of this turn: a thousand no-op jobs ending together cost one handle, not
        a thousand, and the machine is never re-entered from inside its own actions
        (an inline job ends inside `start`, which the machine's actions call)."""
        self._ended.append((key, outcome))
        if not self._reporting and loop is not None:
            self._reporting = True
            loop.call_soon(self._report_ended)

    def _report_ended(self) -> None:
        self._reporting = False
        ended, self._ended = self._ended, []
        for key, outcome in ended:
            self._forget(key, outcome)
        self._hand_over(ended)

    def _progress(self, key: RunKey, details: Any, at_ms: int) -> None:
        if key not in self._contexts or self._on_progress is None:
            return  # exited meanwhile: its result says the rest
        try:
            self._on_progress(key, details, at_ms)
        except Exception:
            log.exception("handling the progress of run %s failed", key)

    def cancel(self, key: RunKey, reason: str) -> None:
        """Ask the job of ``key`` to stop; its exit is reported later as usual."""
        ctx = self._contexts.get(key)
        if ctx is None:
            return
        ctx.request_cancel(reason)
        task = self._tasks.get(key)
        if task is not None:
            task.cancel(reason)
            # A task that ends cancelled (or was cancelled before its first step)
            # reports nothing itself: this callback does (see `_run_async`).
            task.add_done_callback(lambda t: self._async_exited(key, ctx, t))

    def context(self, key: RunKey) -> RunContext | None:
        return self._contexts.get(key)

    @property
    def running(self) -> int:
        return len(self._contexts)

    def _async_exited(self, key: RunKey, ctx: RunContext, task: asyncio.Task[None]) -> None:
        if self._tasks.get(key) is not task:
            return  # reported by `_run_async` already (or a second cancel's callback)
        # Still registered: it never returned from `_run_async`, so it ended cancelled.
        del self._tasks[key]
        self._exited(
            key, _cancelled_outcome(ctx.cancel_reason) if ctx.cancelled else _stray_cancel()
        )

    def _sync_exited(self, key: RunKey, fut: concurrent.futures.Future[Outcome]) -> None:
        try:
            outcome = fut.result()
        except BaseException as exc:  # only if the pool itself failed to run it
            outcome = Outcome(RunStatus.FAILED, error_of(exc))
        self._exited(key, outcome)

    def _exited(self, key: RunKey, outcome: Outcome) -> None:
        self._forget(key, outcome)
        self._hand_over([(key, outcome)])

    def _forget(self, key: RunKey, outcome: Outcome) -> None:
        """The job of ``key`` is gone: no context to cancel, its duration observed."""
        self._contexts.pop(key, None)
        started = self._started.pop(key, None)
        if started is not None:
            metrics.job_exited(started[0], outcome.status, time.perf_counter() - started[1])

    def _hand_over(self, exits: list[tuple[RunKey, Outcome]]) -> None:
        on_exits = self._on_exits
        if on_exits is not None:
            try:
                on_exits(exits)
            except Exception:
                log.exception("handling the exits of runs %s failed", [key for key, _ in exits])
                if len(exits) > 1:
                    # Each again alone, so one exit that cannot be handled does not
                    # keep the others' slots taken; an exit handled before the
                    # failure is not running any more and is ignored the second time.
                    for one in exits:
                        self._hand_over([one])
            return
        on_exit = self._on_exit
        assert on_exit is not None  # one of the two, checked at construction
        for key, outcome in exits:
            try:
                on_exit(key, outcome)
            except Exception:
                log.exception("handling the exit of run %s failed", key)

    async def close(self) -> None:
        """Cancel what still runs and wait for async jobs; threads are not waited for."""
        for key in list(self._contexts):
            self.cancel(key, "worker stopping")
        tasks = list(self._tasks.values())
        if tasks:
            # A job that swallows its cancellation would hold the worker's exit
            # for ever: wait a bounded time, then leave it behind.
            _, pending = await asyncio.wait(tasks, timeout=CLOSE_WAIT_S)
            if pending:
                log.warning(
                    "%d async jobs did not stop within %.0f s of being cancelled; "
                    "leaving them behind",
                    len(pending),
                    CLOSE_WAIT_S,
                )
        self._pool.shutdown(wait=False, cancel_futures=True)
