"""A mixed fleet: one Python worker and one Go worker in the same group, on the same
runs topic, under a burst of 5,000 runs, killed (SIGKILL) in turns and restarted
during the burst (docs/WORKER-PROTOCOL.md §13, issue "workers in any language").

Every run must end answered exactly once: one visible result per (run_id, attempt),
none missing, every one succeeded, read read_committed and parsed with kafkron's own
`parse_result`. Most runs are `test.noop` so the burst costs little; one in twenty
is a 1 s `test.sleep` so each victim is killed with jobs provably running (the test
waits for a start mark of the victim in the chunk just written before it kills).
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.conformance.harness import GO_WORKER, PYTHON_WORKER, Worker, probe_until, wait_results
from tests.kit.worker import T0, marks, produce, results, run_record, wait_marks
from topics.messages import run_id_for
from topics.names import Settings

PARTITIONS = 6
SESSION_MS = 6_000
RUNS = 5_000
CHUNKS = 10
KILLS = 8  # chunks 1..8 each end with a kill: Python, Go, Python, ...
SLEEPER_EVERY = 20
# No run may reach its deadline while partitions wait for their next owner: the
# worker leaves a run past its deadline to the shard, and no shard runs here.
RUN_TIMEOUT_S = 3_600


def _chunk(index: int) -> list[tuple[bytes, bytes]]:
    size = RUNS // CHUNKS
    records = []
    for i in range(index * size, (index + 1) * size):
        if i % SLEEPER_EVERY == 0:
            records.append(
                run_record(f"fleet-{i}", "test.sleep", {"seconds": 1.0}, timeout_s=RUN_TIMEOUT_S)
            )
        else:
            records.append(run_record(f"fleet-{i}", "test.noop", timeout_s=RUN_TIMEOUT_S))
    return records


@pytest.mark.kafka_partitions(PARTITIONS)
async def test_a_mixed_fleet_killed_in_turns_answers_every_run_once(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    started_s = time.monotonic()
    kinds = {"py": PYTHON_WORKER, "go": GO_WORKER}
    generation = {"py": 1, "go": 1}

    def start(kind: str) -> Worker:
        name = f"{kind}-{generation[kind]}"
        return Worker(
            kafka_settings,
            tmp_path,
            name,
            kinds[kind],
            concurrency=8,
            session_timeout_ms=SESSION_MS,
        )

    live = {"py": start("py"), "go": start("go")}
    every: list[Worker] = list(live.values())
    killed: list[str] = []
    try:
        await probe_until(kafka_settings, PARTITIONS, {"py-1", "go-1"})
        for index in range(CHUNKS):
            chunk = _chunk(index)
            await produce(kafka_settings, chunk)
            if index >= KILLS:
                continue
            kind = "py" if index % 2 == 0 else "go"
            victim = live[kind]
            chunk_runs = {run_id_for(key.decode(), T0) for key, _ in chunk}
            await wait_marks(
                tmp_path,
                lambda ms, v=victim.name, rs=chunk_runs: any(
                    m[0] == "start" and m[3] == v and m[1] in rs for m in ms
                ),
                timeout_s=120,
            )
            victim.kill()
            killed.append(victim.name)
            print(f"[{time.monotonic() - started_s:.1f} s] killed {victim.name}", file=sys.stderr)
            generation[kind] += 1
            live[kind] = start(kind)
            every.append(live[kind])
        found = await wait_results(
            kafka_settings,
            lambda rs: (
                len({r.schedule_id for r in rs if r.schedule_id.startswith("fleet-")}) >= RUNS
            ),
            workers=list(live.values()),
            timeout_s=600,
        )
        await asyncio.sleep(3)  # a duplicate committed late would show now
        found = [r for r in await results(kafka_settings) if r.schedule_id.startswith("fleet-")]
    finally:
        for worker in every:
            worker.stop()
    runtime_s = time.monotonic() - started_s
    counts = Counter((r.run_id, r.attempt) for r in found)
    duplicates = {k: n for k, n in counts.items() if n > 1}
    expected = {run_id_for(f"fleet-{i}", T0) for i in range(RUNS)}
    gaps = expected - {run_id for run_id, _ in counts}
    print(
        f"mixed fleet: {RUNS} runs, {len(killed)} kills ({', '.join(killed)}), "
        f"{len(found)} results, duplicates {len(duplicates)}, gaps {len(gaps)}, "
        f"{runtime_s:.0f} s",
        file=sys.stderr,
    )
    assert not duplicates, sorted(duplicates)[:20]
    assert not gaps, sorted(gaps)[:20]
    assert set(counts) == {(run_id, 1) for run_id in expected}
    assert {r.status for r in found} == {"succeeded"}
    answered_by = {r.worker for r in found}
    assert any(w.startswith("py-") for w in answered_by), answered_by
    assert any(w.startswith("go-") for w in answered_by), answered_by
    assert len(killed) == KILLS
    # Some sleeper started by a killed worker ran again on its next owner.
    starts = Counter(m[1] for m in marks(tmp_path) if m[0] == "start")
    assert any(n >= 2 for n in starts.values()), "no kill interrupted a running job"
