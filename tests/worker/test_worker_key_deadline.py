"""A run held back for its concurrency key is woken at its deadline (docs/DESIGN.md
§8.2, "Deadlines"): held behind the key's limit, or behind an adoption's wait, it
ends ``timed_out`` then, never started, and its offset is released.

Before, a held run had no wake-up of its own: it stayed queued, its offset open,
until the key's running job exited, however long that took; one long job of a key
could fill the partition's open-run bound with retries long past their deadlines.
"""

from __future__ import annotations

from actors.worker.core import StartJob, WorkerCore
from tests.kit.worker import heard
from tests.worker.test_worker_keys import AFTER_ADOPTION, LEASE_MS, T0, core, keyed
from topics.messages import parse_result, run_id_for
from topics.vocabulary import RunStatus


def _results(worker: WorkerCore) -> dict[str, tuple[RunStatus, str]]:
    """Each result's status and error type; its message names the key."""
    commit = worker.take_commit(0)
    assert commit is not None
    out = {}
    for record in commit.results:
        result = parse_result(record.value or b"")
        assert result.error is not None
        assert "concurrency key 'customer-42' (limit 1)" in result.error["message"]
        out[result.run_id] = (result.status, result.error["type"])
    return out


def test_a_run_held_behind_its_keys_limit_times_out_at_its_deadline() -> None:
    worker = core()
    deadline = AFTER_ADOPTION + 5_000
    out = worker.receive(keyed(0, deadline_ms=T0 + 3_600_000), AFTER_ADOPTION)  # a long job
    out += worker.receive(keyed(1, deadline_ms=deadline), AFTER_ADOPTION)
    assert [a.key[1] for a in out if isinstance(a, StartJob)] == [0]
    assert worker.next_due_ms(lease=False) == deadline  # woken for it
    out = worker.advance(heard(worker, deadline))
    assert not [a for a in out if isinstance(a, StartJob)]
    assert worker.queued == 0
    run_1 = run_id_for("s1", T0)
    assert _results(worker) == {run_1: (RunStatus.TIMED_OUT, "Timeout")}
    assert worker.running == 1  # the long job runs on, its key's slot still taken


def test_a_run_held_behind_an_adoptions_wait_times_out_at_its_deadline() -> None:
    worker = core()
    deadline = T0 + LEASE_MS // 2  # before the previous owner is known stopped
    assert not worker.receive(keyed(0, deadline_ms=deadline), T0 + 1)
    assert worker.next_due_ms(lease=False) == deadline
    out = worker.advance(heard(worker, deadline))
    assert not [a for a in out if isinstance(a, StartJob)]
    assert worker.queued == 0
    assert _results(worker) == {run_id_for("s0", T0): (RunStatus.TIMED_OUT, "Timeout")}


def test_held_runs_wake_at_the_earliest_of_their_deadlines() -> None:
    worker = core()
    worker.receive(keyed(0, deadline_ms=T0 + 3_600_000), AFTER_ADOPTION)
    for offset, late_ms in ((1, 9_000), (2, 7_000), (3, 8_000)):
        worker.receive(keyed(offset, deadline_ms=AFTER_ADOPTION + late_ms), AFTER_ADOPTION)
    assert worker.next_due_ms(lease=False) == AFTER_ADOPTION + 7_000
    worker.advance(heard(worker, AFTER_ADOPTION + 7_000))
    assert worker.queued == 2
    assert worker.next_due_ms(lease=False) == AFTER_ADOPTION + 8_000
