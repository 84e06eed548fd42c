"""A process frozen past its lease (SIGSTOP, a VM pause) starts nothing when it thaws
(docs/DESIGN.md §8.2, §8.5).

When it thaws, the first thing it handles may be a fetched batch or a job's exit,
before the turn (`WorkerCore.advance`) that declares its lease lost. Its partitions
may have been given to another owner meanwhile, which starts the same keys' runs
from ``adoption + lease_loss_ms`` on: a start here would be on top of the new
owner's. So `_fill` starts nothing once ``now`` is past the lease.
"""

from __future__ import annotations

from actors.worker.core import LeaseLost, Outcome, StartJob, WorkerCore
from tests.kit.worker import heard
from tests.worker.test_worker_keys import keyed
from tests.worker.test_worker_ratelimit import limited, plain
from topics.vocabulary import ConcurrencyStrategy, RunStatus

T0 = 1_790_000_000_000
LEASE_MS = 3_000
THAWED = T0 + 60_000  # frozen for a minute: the lease ran out long ago


def core() -> WorkerCore:
    made = WorkerCore(
        worker="w1",
        concurrency=50,
        known_job=lambda n: n == "noop",
        now_ms=T0 - 60_000,
        lease_loss_ms=LEASE_MS,
    )
    made.assign(0, 0, None, T0 - 60_000)  # adopted a minute ago: keys may start
    heard(made, T0)  # the last heartbeat answered before the freeze
    return made


def starts(actions: list[object]) -> list[int]:
    return [a.key[1] for a in actions if isinstance(a, StartJob)]


def test_a_keyed_job_exiting_after_the_thaw_starts_no_run_of_its_key() -> None:
    worker = core()
    out = worker.receive(keyed(0, strategy=ConcurrencyStrategy.QUEUE), T0)
    out += worker.receive(keyed(1, strategy=ConcurrencyStrategy.QUEUE), T0)
    assert starts(out) == [0]  # run 1 waits for the key's one slot
    # Frozen; the job ends while the process is stopped, seen at the thaw.
    assert starts(worker.job_exited((0, 0, 0), Outcome(RunStatus.SUCCEEDED), THAWED)) == []
    out = worker.advance(THAWED)  # the turn that declares the lease lost
    assert [a for a in out if isinstance(a, LeaseLost)] and starts(out) == []
    assert worker.assigned == frozenset()


def test_a_batch_handled_after_the_thaw_starts_no_rate_limited_run() -> None:
    worker = core()
    out: list[object] = []
    for offset in range(3):
        out += worker.receive(limited(offset), T0)
    assert starts(out) == [0, 1, 2]  # the burst; the bucket refills while frozen
    out = []
    for offset in range(3, 6):  # a fetch answered before the freeze, handled after it
        out += worker.receive(limited(offset), THAWED)
    assert starts(out) == []  # not up to a burst on top of the new owner's
    assert starts(worker.receive(plain(6), THAWED)) == []  # nor anything else


def test_at_the_lease_s_last_instant_runs_still_start() -> None:
    worker = core()
    last_ms = T0 + LEASE_MS  # `advance` declares the lease lost only after it
    assert starts(worker.receive(plain(0), last_ms)) == [0]
    assert starts(worker.receive(plain(1), last_ms + 1)) == []
    assert [a for a in worker.advance(last_ms + 1) if isinstance(a, LeaseLost)]


def test_runs_refused_past_the_lease_start_at_the_next_turn_if_the_lease_was_renewed() -> None:
    # The job loop stalled past the lease while the group still had us: the exit is
    # handled before the heartbeat's report, the heartbeat renews the lease, and the
    # turn due at once starts what the exit could not.
    worker = core()
    assert starts(worker.receive(keyed(0), T0)) == [0]
    assert starts(worker.receive(keyed(1), T0)) == []
    late_ms = T0 + 2 * LEASE_MS
    assert starts(worker.job_exited((0, 0, 0), Outcome(RunStatus.SUCCEEDED), late_ms)) == []
    assert worker.next_due_ms(lease=False) == late_ms  # a turn at once
    out = worker.advance(heard(worker, late_ms))
    assert starts(out) == [1] and not [a for a in out if isinstance(a, LeaseLost)]
    assert worker.next_due_ms(lease=False) == T0 + 600_000  # run 1's deadline, no sooner
