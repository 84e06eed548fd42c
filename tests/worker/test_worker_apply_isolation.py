"""One action that raises does not lose the others of its turn.

A turn's exits free several slots at once, and the core answers with one StartJob
per run it started. If starting one raises (a bug: here the registry lost the job
between the core's check and the start), the runs after it must still start, and
the one that raised must be reported failed, or the core holds both as running for
good and their slots and offsets with them (docs/DESIGN.md §8.3).
"""

from __future__ import annotations

import asyncio

from actors.worker.registry import JobSpec, Registry
from actors.worker.runtime import WorkerOptions, WorkerRuntime
from tests.kit.worker import now_ms
from tests.worker.test_worker_core import results_of, run_record
from topics.names import Settings


class VanishingRegistry(Registry):
    """Says it holds ``vanishing`` (the core's check) but cannot give it (the start)."""

    def get(self, name: str) -> JobSpec | None:
        return None if name == "vanishing" else super().get(name)


def test_a_turns_starts_survive_one_start_that_raises() -> None:
    async def scenario() -> tuple[int, dict[str, tuple[str, str | None]]]:
        gate = asyncio.Event()

        async def gated(ctx: object) -> None:
            await gate.wait()

        async def noop(ctx: object) -> None:
            return None

        registry = VanishingRegistry()
        registry.register("gated", gated)
        registry.register("noop", noop)
        registry.register("vanishing", noop)
        runtime = WorkerRuntime(
            Settings(bootstrap="127.0.0.1:1", namespace="t"),
            registry,
            WorkerOptions(concurrency=2),
        )
        core = runtime.core
        core.rates.known = True
        t = now_ms()
        core.assign(0, 0, None, t)
        deadline = t + 3_600_000
        for offset, name in enumerate(["gated", "gated", "vanishing", "noop"]):
            runtime._apply(core.receive(run_record(offset, name=name, deadline_ms=deadline), t))
        gate.set()  # offsets 0 and 1 end in one turn: StartJob 2 (raises), StartJob 3
        for _ in range(200):
            if core.running == 0:
                break
            await asyncio.sleep(0.01)
        running = core.running
        commit = core.take_commit(0)
        await runtime._executor.close()
        results = {
            r.schedule_id: (r.status, None if r.error is None else r.error["type"])
            for r in results_of(commit)
        }
        return running, results

    running, results = asyncio.run(scenario())
    assert running == 0, "a run the core holds as running was never started"
    assert results == {
        "s0": ("succeeded", None),
        "s1": ("succeeded", None),
        "s2": ("failed", "LookupError"),
        "s3": ("succeeded", None),
    }
