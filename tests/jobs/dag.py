"""Jobs of the DAG integration tests (``--jobs tests.jobs.worker,tests.jobs.dag``).

Like `tests.jobs.worker`, each appends ``start``/``end`` lines to ``$KAFKRON_TEST_MARKS``.
"""

from __future__ import annotations

import os

from actors import RunContext, job


def _mark(event: str, ctx: RunContext) -> None:
    path = os.environ.get("KAFKRON_TEST_MARKS")
    if path:
        with open(path, "a", encoding="utf-8") as marks:
            marks.write(f"{event} {ctx.run_id} {ctx.attempt} {ctx.worker}\n")


@job("test.fail_until")
def fail_until(ctx: RunContext, flag: str) -> None:
    """Fails until the file ``flag`` exists (a bug that a deploy fixes)."""
    _mark("start", ctx)
    if not os.path.exists(flag):
        raise RuntimeError(f"{flag} is missing (attempt {ctx.attempt})")
    _mark("end", ctx)


@job("test.record_interval")
def record_interval(ctx: RunContext, path: str) -> None:
    """Writes the logical date and data interval the job's context holds to ``path``."""
    _mark("start", ctx)
    assert ctx.logical_date is not None and ctx.data_interval is not None
    start, end = ctx.data_interval
    with open(path, "w", encoding="utf-8") as out:
        out.write(f"{ctx.logical_date.isoformat()} {start.isoformat()} {end.isoformat()}\n")
    _mark("end", ctx)
