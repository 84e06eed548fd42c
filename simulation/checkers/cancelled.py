"""A cancelled attempt stops: no success after its cancel, no retry (docs/DESIGN.md §6.6).

For every cancel record on ``{ns}.runs`` (``run.cancel``, ``overlap: cancel_other``):

- its attempt has no ``succeeded`` result appended after the cancel record; a worker
  that had the attempt when the cancel arrived stops it and writes ``cancelled``
  (a success is legitimate only when decided and committed before the cancel
  reached the log);
- no later attempt of the run is emitted (a cancelled attempt is never retried);
- once the world has healed, the attempt has a result (the worker's, or the
  shard's ``cancelled`` at the deadline when no worker had it).
"""

from __future__ import annotations

from simulation.checkers.evidence import Evidence, Verdict
from topics.timefmt import format_ms
from topics.vocabulary import RunStatus


def check(evidence: Evidence) -> Verdict:
    verdict = Verdict("cancelled", "a cancelled attempt has no success result and no retry")
    results: dict[tuple[str, int], list[tuple[str, int]]] = {}
    for r in evidence.results:
        results.setdefault((r.run_id, r.attempt), []).append((r.status, r.append_ms))
    attempts: dict[str, int] = {}
    for run in evidence.runs:
        attempts[run.run_id] = max(attempts.get(run.run_id, 0), run.attempt)
    for run_id, attempt, cancel_ms in evidence.cancels:
        verdict.checked += 1
        found = results.get((run_id, attempt), [])
        for status, append_ms in found:
            if status == RunStatus.SUCCEEDED and append_ms > cancel_ms:
                verdict.fail(
                    f"{run_id} attempt {attempt} succeeded at {format_ms(append_ms)}, after "
                    f"its cancel record at {format_ms(cancel_ms)}"
                )
        if attempts.get(run_id, 0) > attempt:
            verdict.fail(f"{run_id} was retried (attempt {attempts[run_id]}) after its cancel")
        if not found and cancel_ms < evidence.heal_ms and evidence.end_ms > evidence.heal_ms:
            verdict.fail(f"{run_id} attempt {attempt} was cancelled but never got a result")
    return verdict
